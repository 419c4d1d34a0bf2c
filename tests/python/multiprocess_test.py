"""A server started by the `reverb_server` command, with writers and samplers
in other processes."""

import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import reverb

TIMEOUT = 60
_BIN = pathlib.Path(sys.executable).parent

CONFIG = """
tables: {
  table_name: "uniform"
  sampler: { uniform: true }
  remover: { fifo: true }
  max_size: 100000
  max_times_sampled: 0
  rate_limiter: {
    samples_per_insert: 1.0
    min_size_to_sample: 1
    min_diff: -1.7976931348623157e+308
    max_diff: 1.7976931348623157e+308
  }
}
tables: {
  table_name: "queue"
  sampler: { fifo: true }
  remover: { fifo: true }
  max_size: 10
  max_times_sampled: 1
  rate_limiter: {
    samples_per_insert: 1.0
    min_size_to_sample: 1
    min_diff: 0.0
    max_diff: 10.0
  }
}
"""


@pytest.fixture(name='server_process')
def server_process_fixture():
  process = subprocess.Popen(
      [str(_BIN / 'reverb_server'), '--config', CONFIG],
      stdout=subprocess.PIPE, text=True)
  try:
    line = process.stdout.readline()  # Printed once listening.
    assert 'listening on port' in line, line
    yield process, int(line.split()[-1])
  finally:
    if process.poll() is None:
      process.kill()
    process.wait(TIMEOUT)


def run_python(code: str, *args) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, '-c', textwrap.dedent(code)] +
                          [str(a) for a in args])


WRITER = """
  import sys, numpy as np, reverb
  client = reverb.Client(f'localhost:{sys.argv[1]}')
  offset = int(sys.argv[2])
  with client.writer(max_sequence_length=2) as writer:
    for i in range(200):
      writer.append({'x': np.full([84, 84], offset + i, np.int32)})
      if i:
        writer.create_item('uniform', num_timesteps=2, priority=1.0)
  for i in range(20):
    client.insert(np.int64(offset + i), priorities={'queue': 1.0})
"""

SAMPLER = """
  import sys, reverb
  client = reverb.Client(f'localhost:{sys.argv[1]}')
  for sample in client.sample('uniform', num_samples=300, emit_timesteps=False,
                              timeout=60):
    x = sample.data[0]
    assert x.shape == (2, 84, 84), x.shape
    assert (x[1] == x[0] + 1).all()
  seen = [int(s[0].data[0]) for s in client.sample('queue', num_samples=20,
                                                   timeout=60)]
  assert len(set(seen)) == 20, seen
"""


def test_command_serves_writers_and_samplers_in_other_processes(
    server_process):
  server, port = server_process
  processes = [run_python(WRITER, port, k * 1000) for k in range(2)]
  processes += [run_python(SAMPLER, port) for _ in range(2)]
  for process in processes:
    assert process.wait(TIMEOUT) == 0
  info = reverb.Client(f'localhost:{port}').server_info(timeout=TIMEOUT)
  assert info['uniform'].current_size == 2 * 199
  assert info['uniform'].num_episodes == 2
  assert info['queue'].current_size == 0
  assert info['queue'].rate_limiter_info.sample_stats.completed == 40

  server.send_signal(signal.SIGINT)
  assert server.wait(TIMEOUT) == 0


def test_client_in_another_process_fails_when_server_dies(server_process,
                                                         tmp_path):
  server, port = server_process
  connected = tmp_path / 'connected'
  blocked = run_python(
      """
      import pathlib, sys, reverb
      client = reverb.Client(f'localhost:{sys.argv[1]}')
      client.server_info(timeout=60)
      pathlib.Path(sys.argv[2]).touch()
      try:
        next(client.sample('queue'))  # Empty: blocks without a timeout.
      except Exception as e:
        print(type(e).__name__, e)
        sys.exit(3)
      """, port, connected)
  # Connected (however long the child took to start), then blocked in
  # sample.
  deadline = time.monotonic() + TIMEOUT
  while not connected.exists():
    assert blocked.poll() is None and time.monotonic() < deadline
    time.sleep(0.05)
  with pytest.raises(subprocess.TimeoutExpired):
    blocked.wait(1)
  server.kill()
  # Raises once reconnecting has failed for the sampler's reconnect window.
  assert blocked.wait(TIMEOUT) == 3


def test_command_rejects_bad_config():
  result = subprocess.run(
      [str(_BIN / 'reverb_server'), '--config', 'tables: { nonsense: 1 }'],
      capture_output=True, text=True, timeout=TIMEOUT)
  assert result.returncode != 0
  assert 'Invalid server config' in result.stderr
