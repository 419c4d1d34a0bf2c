"""The `reverb` command (reverb/cli.py): its output and exit codes."""

import io
import json
import os
import pathlib
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import reverb
from reverb import cli

TIMEOUT = 60  # Only to avoid hangs.


def _tables():
  return [
      reverb.Table.queue('queue', 10),
      reverb.Table(
          name='prio', sampler=reverb.selectors.Prioritized(0.8),
          remover=reverb.selectors.Fifo(), max_size=100,
          rate_limiter=reverb.rate_limiters.MinSize(2),
          signature={'obs': reverb.specs.TensorSpec([3, 4], np.float32)}),
  ]


@pytest.fixture(name='server')
def server_fixture():
  server = reverb.Server(_tables())
  yield server
  server.stop()


def _address(server):
  return f'localhost:{server.port}'


def _run(*argv):
  out = io.StringIO()
  code = cli.main(list(argv), out=out)
  return code, out.getvalue()


def _command(*argv, **kwargs):
  return subprocess.run([sys.executable, '-m', 'reverb', *argv],
                        capture_output=True, text=True, timeout=TIMEOUT,
                        **kwargs)


def _free_port():
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


def test_info_shows_every_table_on_a_line(server):
  client = server.localhost_client()
  for i in range(10):  # Full: the queue's inserts wait.
    client.insert(np.float32(i), {'queue': 1.0})
  client.insert({'obs': np.zeros([3, 4], np.float32)}, {'prio': 1.0})
  code, out = _run('info', _address(server))
  assert code == 0
  header, rule, *rows = out.splitlines()
  assert header.split() == ['table', 'size', '/', 'max', 'sampler', 'remover',
                            'rate', 'limiter', 'blocks', 'signature']
  assert set(rule) == {'-', ' '}
  assert [row.split()[:6] for row in rows] == [
      ['prio', '1', '/', '100', 'Prioritized(0.8)', 'Fifo'],
      ['queue', '10', '/', '10', 'Fifo', 'Fifo']]
  # Columns line up: every row's sampler starts under the header's.
  column = header.index('sampler')
  assert all(row[column - 2:column] == '  ' and row[column] != ' '
             for row in rows)
  assert 'spi=1 min_size=2 diff=[-inf, inf]' in rows[0]
  assert rows[0].rstrip().endswith('samples  {obs: float32[3,4]}')
  assert rows[1].rstrip().endswith('inserts  -')


def test_info_json_for_scripts(server):
  client = server.localhost_client()
  client.insert(np.float32(1), {'queue': 1.0})
  code, out = _run('info', '--json', _address(server))
  assert code == 0
  tables = {t['table']: t for t in json.loads(out)}
  assert tables['queue'] == {
      'table': 'queue', 'size': 1, 'max_size': 10, 'sampler': 'Fifo',
      'remover': 'Fifo', 'rate_limiter': 'spi=1 min_size=1 diff=[0, 10]',
      'inserts': 1, 'samples': 0, 'blocks': [], 'signature': '-'}
  assert tables['prio']['blocks'] == ['samples']  # Below its min size.


def test_info_of_shards_sums_them():
  servers = [reverb.Server(_tables()) for _ in range(2)]
  try:
    for n, server in zip((2, 3), servers):
      for i in range(n):
        server.localhost_client().insert(np.float32(i), {'queue': 1.0})
    code, out = _run('info', '--json', *map(_address, servers))
    assert code == 0
    assert {t['table']: t['size'] for t in json.loads(out)} == {
        'queue': 5, 'prio': 0}
  finally:
    for server in servers:
      server.stop()


def test_no_server_is_one_line_and_exit_code_1():
  address = f'localhost:{_free_port()}'
  result = _command('info', address)
  assert result.returncode == 1
  assert result.stdout == ''
  assert result.stderr.startswith(
      f'reverb info: No Reverb server answers at {address}'), result.stderr
  assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_reset_needs_yes_and_a_known_table(server):
  client = server.localhost_client()
  client.insert(np.float32(1), {'queue': 1.0})
  result = _command('reset', _address(server), 'nope', '--yes')
  assert result.returncode == 2
  assert "No table 'nope'" in result.stderr
  assert 'its tables: prio, queue.' in result.stderr
  result = _command('reset', _address(server), 'queue')
  assert result.returncode == 2 and '--yes' in result.stderr
  assert client.server_info()['queue'].current_size == 1
  assert _run('reset', _address(server), 'queue', '--yes') == (
      0, 'queue: reset\n')
  assert client.server_info()['queue'].current_size == 0


def test_checkpoint_prints_where(tmp_path):
  server = reverb.Server(_tables(), checkpointer=(
      reverb.checkpointers.DefaultCheckpointer(str(tmp_path))))
  try:
    server.localhost_client().insert(np.float32(1), {'queue': 1.0})
    code, out = _run('checkpoint', _address(server))
    assert code == 0
    path = pathlib.Path(out.strip())
    assert path.parent == tmp_path and (path / 'DONE').exists()
  finally:
    server.stop()


def test_checkpoint_draws_a_progress_bar_in_a_terminal(tmp_path):
  # zlib level 9 over incompressible chunks: a save of several seconds.
  server = reverb.Server(
      [reverb.Table.queue('big', 1000)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          str(tmp_path), zlib_level=9))
  fd = None
  try:
    client = server.localhost_client()
    rng = np.random.default_rng(0)
    for _ in range(64):
      client.insert(rng.integers(0, 255, 1 << 20, dtype=np.uint8),
                    {'big': 1.0})
    fd, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, '-m', 'reverb', 'checkpoint', _address(server)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    bar = b''
    deadline = time.monotonic() + TIMEOUT
    while process.poll() is None and time.monotonic() < deadline:
      if select.select([fd], [], [], 0.5)[0]:
        try:
          bar += os.read(fd, 65536)
        except OSError:
          break
    path = pathlib.Path(process.stdout.read().decode().strip())
    assert process.wait(timeout=TIMEOUT) == 0, bar
  finally:
    if fd is not None:
      os.close(fd)
    server.stop()
  assert path.parent == tmp_path and (path / 'DONE').exists()
  frames = [f for f in bar.decode().replace('\r\n', '\n').split('\r') if f]
  drawn = [f.strip() for f in frames if f.startswith('saving [')]
  assert len(drawn) >= 3, bar
  percents = [int(re.search(r' (\d+)%', f)[1]) for f in drawn
              if ' MiB/s' in f]
  assert percents and percents == sorted(percents), drawn
  assert all('/ 64.0 MiB' in f for f in drawn if ' MiB/s' in f), drawn
  assert bar.endswith(b'\n')  # The line under the bar is free again.


def test_checkpoint_progress_lines_and_bar():
  mib = 1 << 20
  assert cli._progress_text(10 * mib, 40 * mib, 2.0, width=None) == (
      'saving: 10.0 / 40.0 MiB   25%  5.0 MiB/s  about 6 s left')
  assert cli._progress_text(0, 0, 1.0, width=None) == (
      'saving: snapshotting the tables (1 s)')
  bar = cli._progress_text(10 * mib, 40 * mib, 2.0, width=80)
  cells = bar[bar.index('[') + 1:bar.index(']')]
  assert len(cells) <= 40 and cells.count('#') == len(cells) // 4
  assert set(cells) == {'#', '.'} and len(bar) < 80


def test_watch_refreshes_with_rates_in_a_terminal_until_ctrl_c(server):
  client = server.localhost_client()
  stop = threading.Event()

  def insert():
    while not stop.is_set():
      client.insert({'obs': np.zeros([3, 4], np.float32)}, {'prio': 1.0})
      time.sleep(0.01)

  writer = threading.Thread(target=insert)
  writer.start()
  fd, terminal = pty.openpty()
  process = subprocess.Popen(
      [sys.executable, '-m', 'reverb', 'watch', '--interval', '0.3',
       _address(server)], stdin=terminal, stdout=terminal, stderr=terminal)
  os.close(terminal)
  output = b''
  try:
    deadline = time.monotonic() + TIMEOUT
    while output.count(b'\x1b[2J') < 4 and time.monotonic() < deadline:
      if select.select([fd], [], [], 1)[0]:
        try:
          output += os.read(fd, 65536)
        except OSError:
          break
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=TIMEOUT)
  finally:
    stop.set()
    writer.join()
    os.close(fd)
  assert code == 0, output
  frames = output.decode().split('\x1b[H\x1b[2J')[1:]
  assert len(frames) >= 4, output
  last = frames[-2].splitlines()  # A complete frame.
  assert '(Ctrl-C to stop)' in last[0]
  header = last[1].split()
  assert header[-3:] == ['inserts/s', 'samples/s', 'signature']
  prio = next(line for line in last if line.startswith('prio'))
  inserts_per_s = float(prio.split()[-4])
  assert inserts_per_s > 0, last


def test_serve_runs_reverb_server_and_the_console_script_exists():
  config = ('port: 0 tables: { table_name: "t" sampler { uniform: true } '
            'remover { fifo: true } max_size: 10 rate_limiter { '
            'samples_per_insert: 1 min_size_to_sample: 1 min_diff: -1e9 '
            'max_diff: 1e9 } }')
  process = subprocess.Popen(
      [sys.executable, '-m', 'reverb', 'serve', f'--config={config}'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    line = process.stdout.readline()
    assert 'listening on port' in line, process.stderr.read()
    address = f'localhost:{int(line.split()[-1])}'
    script = pathlib.Path(sys.executable).parent / 'reverb'
    assert script.exists()
    result = subprocess.run([str(script), 'info', address],
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].split()[:4] == ['t', '0', '/', '10']
  finally:
    process.terminate()
    process.wait(timeout=TIMEOUT)
