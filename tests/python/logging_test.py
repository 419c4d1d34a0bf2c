"""libreverb's log lines reach `logging.getLogger('reverb')` with their level:
checkpoint progress at INFO (REVERB_PROGRESS_INTERVAL_MS sets how often),
warnings at WARNING (among them dm-reverb's warning of a TrajectoryWriter
whose items pile up unflushed); silencing the logger silences them."""

import logging
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import reverb

TIMEOUT = 60  # Only to avoid hangs.


def _server(checkpoint_dir):
  return reverb.Server(
      [reverb.Table.queue('table', 100)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          str(checkpoint_dir)))


def _records(caplog, pattern):
  return [r for r in caplog.records
          if r.name == 'reverb' and re.match(pattern, r.getMessage())]


def test_checkpoint_save_and_load_log_their_progress(tmp_path, caplog,
                                                     monkeypatch):
  monkeypatch.setenv('REVERB_PROGRESS_INTERVAL_MS', '0')  # Every chunk.
  caplog.set_level(logging.INFO, logger='reverb')
  rng = np.random.default_rng(0)
  server = _server(tmp_path)
  client = server.localhost_client()
  for _ in range(20):  # 20 chunks of 1 MiB of incompressible bytes.
    client.insert(rng.integers(0, 255, 1 << 20, dtype=np.uint8),
                  {'table': 1.0})
  path = client.checkpoint()
  server.stop()

  saves = _records(caplog, r'Saving checkpoint ')
  assert {r.levelno for r in saves} == {logging.INFO}
  done = [r.getMessage() for r in saves if ': done, ' in r.getMessage()]
  assert len(done) == 1, [r.getMessage() for r in saves]
  assert done[0].startswith(f'Saving checkpoint {path}: done, 20.0 MiB in ')
  steps = [float(re.search(r': ([\d.]+) of 20\.0 MiB', r.getMessage())[1])
           for r in saves if r.getMessage() not in done]
  assert len(steps) == 20 and steps == sorted(steps) and steps[-1] == 20.0

  caplog.clear()
  restored = _server(tmp_path)
  assert restored.localhost_client().server_info()['table'].current_size == 20
  restored.stop()
  loads = _records(caplog, rf'Loading checkpoint {re.escape(path)}: ')
  assert loads and {r.levelno for r in loads} == {logging.INFO}
  assert ': done, ' in loads[-1].getMessage()


def test_a_quick_checkpoint_logs_nothing_by_default(tmp_path, caplog,
                                                    monkeypatch):
  monkeypatch.delenv('REVERB_PROGRESS_INTERVAL_MS', raising=False)
  caplog.set_level(logging.DEBUG, logger='reverb')
  server = _server(tmp_path)
  client = server.localhost_client()
  client.insert(np.zeros(10, np.float32), {'table': 1.0})
  client.checkpoint()
  server.stop()
  assert not [r for r in caplog.records if r.name == 'reverb']


def test_warnings_come_as_warnings(caplog, monkeypatch):
  monkeypatch.setenv('REVERB_KEEPALIVE_MS', 'often')
  caplog.set_level(logging.INFO, logger='reverb')
  server = reverb.Server([reverb.Table.queue('table', 10)])
  server.stop()
  warnings = _records(caplog, r'Ignoring REVERB_KEEPALIVE_MS=often ')
  assert warnings and {r.levelno for r in warnings} == {logging.WARNING}


_SCRIPT = """
import logging, os, sys
os.environ['REVERB_KEEPALIVE_MS'] = 'often'
import reverb
if sys.argv[1] == 'silenced':
  logging.getLogger('reverb').setLevel(logging.ERROR)
server = reverb.Server([reverb.Table.queue('table', 10)])
server.stop()
"""


def test_the_logger_silences_and_shows_them_on_stderr_by_default():
  def stderr_of(mode):
    return subprocess.run([sys.executable, '-c', _SCRIPT, mode],
                          capture_output=True, text=True, check=True,
                          timeout=TIMEOUT).stderr
  # Python's last-resort handler shows warnings on stderr, unprefixed.
  assert 'Ignoring REVERB_KEEPALIVE_MS=often' in stderr_of('default')
  assert 'REVERB_KEEPALIVE_MS' not in stderr_of('silenced')


_INVALID_UTF8_SCRIPT = """
import logging, sys
import grpc
import reverb
if sys.argv[1] == 'silenced':
  logging.getLogger('reverb').setLevel(logging.CRITICAL)
server = reverb.Server([reverb.Table.queue('table', 10)])
channel = grpc.insecure_channel(f'localhost:{server.port}')
reset = channel.unary_unary('/deepmind.reverb.ReverbService/Reset')
for _ in range(20):  # ResetRequest.table, a string field, is not UTF-8.
  try:
    reset(b'\\x0a\\x02\\xff\\xfe', timeout=10)
  except grpc.RpcError:
    pass
print(server.localhost_client().server_info(timeout=10)['table'].max_size)
server.stop()
"""


def test_protobuf_lines_of_hostile_input_are_ours_and_rate_limited():
  # Each request fails to parse, and protobuf logs it: through the `reverb`
  # logger, once a minute (this fresh process: exactly once).
  def run(mode):
    return subprocess.run(
        [sys.executable, '-c', _INVALID_UTF8_SCRIPT, mode],
        capture_output=True, text=True, check=True, timeout=TIMEOUT)
  default = run('default')
  assert default.stdout.split() == ['10']
  lines = [line for line in default.stderr.splitlines()
           if 'invalid UTF-8' in line]
  assert len(lines) == 1, default.stderr
  assert lines[0].startswith('protobuf (') and 'ResetRequest.table' in lines[0]
  assert 'libprotobuf' not in default.stderr
  assert 'invalid UTF-8' not in run('silenced').stderr


_PENDING = (r'The number of pending items is alarmingly high, did you forget '
            r'to call Flush\? (\d+) items are waiting to be sent and (\d+) '
            r'items have been sent to the server but haven\'t been confirmed '
            r'yet\. It is important to call Flush regularly as large numbers '
            r'of pending items can result in OOM crashes on both client and '
            r'server\.$')


_DMREVERB_PYTHON = (pathlib.Path(__file__).resolve().parents[2] /
                    '.venv-dmreverb' / 'bin' / 'python')

# The same pile-up under either package; its stderr shows the warning.
_PILE_UP_SCRIPT = """
import numpy as np
import reverb
server = reverb.Server([reverb.Table.queue('table', 10)], port=None)
client = reverb.Client(f'localhost:{server.port}')
writer = client.trajectory_writer(num_keep_alive_refs=1)
for i in range(200):
  writer.append({'x': np.float32(i)})
  writer.create_item('table', 1.0, {'x': writer.history['x'][-1]})
print(len(list(client.sample('table', num_samples=200, emit_timesteps=False))),
      flush=True)
writer.close()
"""


def _write_unflushed(client, count, flush_every=None):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  for i in range(count):
    writer.append({'x': np.float32(i)})
    writer.create_item('table', 1.0, {'x': writer.history['x'][-1]})
    if flush_every and (i + 1) % flush_every == 0:
      writer.flush(timeout_ms=TIMEOUT * 1000)
  return writer


def test_a_writer_whose_items_pile_up_warns_as_dm_reverb(caplog):
  # The queue table holds 10: the server stores no more until some are
  # sampled, so items pile up unconfirmed in the writer.
  caplog.set_level(logging.INFO, logger='reverb')
  server = reverb.Server([reverb.Table.queue('table', 10)])
  client = server.localhost_client()
  writer = _write_unflushed(client, 100)
  warnings = _records(caplog, _PENDING)
  # From the 50th pending item on, at most once a second: the 100 items
  # take far less.
  assert 1 <= len(warnings) <= 2, [r.getMessage() for r in warnings]
  assert {r.levelno for r in warnings} == {logging.WARNING}
  for record in warnings:
    queued, unconfirmed = re.match(_PENDING, record.getMessage()).groups()
    assert int(queued) + int(unconfirmed) >= 50
  got = [int(s.data[0]) for s in client.sample(
      'table', num_samples=100, emit_timesteps=False, timeout=TIMEOUT)]
  assert got == list(range(100))  # Nothing lost to the warning.
  writer.close()
  server.stop()


def test_a_writer_flushed_regularly_does_not_warn(caplog):
  caplog.set_level(logging.INFO, logger='reverb')
  server = reverb.Server([reverb.Table.queue('table', 1000)])
  _write_unflushed(server.localhost_client(), 200, flush_every=20).close()
  server.stop()
  assert not _records(caplog, 'The number of pending items')


def test_the_pending_items_warning_is_dm_reverbs_text():
  if not _DMREVERB_PYTHON.exists():
    pytest.skip(f'dm-reverb venv missing ({_DMREVERB_PYTHON}); run '
                '.ci/dmreverb_venv')
  for python in (sys.executable, str(_DMREVERB_PYTHON)):
    done = subprocess.run(
        [python, '-I', '-c', _PILE_UP_SCRIPT], capture_output=True,
        text=True, timeout=TIMEOUT * 3, check=False,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
    assert done.stdout.split() == ['200'], (python, done.stderr[-2000:])
    # dm-reverb prefixes "[reverb/cc/trajectory_writer.cc:655] ", ours
    # comes through Python's last-resort handler as it is.
    lines = [line for line in done.stderr.splitlines()
             if 'pending items' in line]
    assert lines, (python, done.stderr[-2000:])
    # dm-reverb writes a log line's prefix and text apart, so the line of
    # another of its threads (its sampler's "Sampler and server are owned
    # by the same process ...") may wrap the warning: there the text need
    # not end its line. Ours must.
    pending = _PENDING if python == sys.executable else _PENDING[:-1]
    for line in lines:
      assert re.search(pending, line), (python, line)
