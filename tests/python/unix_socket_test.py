"""Servers on unix domain sockets (`unix_socket_path=`) and clients over
`unix:PATH`: writers, samples, server info and ReplayIterator; TCP and the
socket at once; the socket file removed at stop, collection and exit; a
stale socket replaced, a regular file or a live server's socket refused;
`reverb_server --unix_socket_path` with clients in other processes."""

import gc
import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import reverb
from reverb import specs

TIMEOUT = 60
_BIN = pathlib.Path(sys.executable).parent


def table(name='t'):
  return reverb.Table(name, reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                      1000, reverb.rate_limiters.MinSize(1),
                      max_times_sampled=1,
                      signature={'x': specs.TensorSpec([2], np.int32)})


def is_socket(path) -> bool:
  return os.path.lexists(path) and stat.S_ISSOCK(os.lstat(path).st_mode)


@pytest.fixture(name='path')
def path_fixture(tmp_path):
  return str(tmp_path / 'reverb.sock')


def write(client, steps):
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for t in steps:
      writer.append({'x': np.full([2], t, np.int32)})
      writer.create_item('t', 1.0, {'x': writer.history['x'][-1]})


def sample_steps(client, count):
  return [int(np.ravel(sample.data[0])[0])
          for sample in client.sample('t', num_samples=count, timeout=TIMEOUT,
                                      emit_timesteps=False)]


def test_only_the_unix_socket_serves_writers_samples_and_info(path):
  with reverb.Server([table()], port=None, unix_socket_path=path) as server:
    assert server.port is None
    assert server.unix_socket_path == path
    assert repr(server).endswith(f'port=None, unix_socket_path={path!r})')
    client = server.localhost_client()
    assert client.server_address == f'unix:{path}'
    write(client, range(3))
    client.insert(np.array([7, 7], np.int32), priorities={'t': 1.0})
    assert client.server_info(timeout=TIMEOUT)['t'].current_size == 4
    assert sample_steps(client, 4) == [0, 1, 2, 7]
    # The three-slash spelling names the same socket.
    write(reverb.Client(f'unix://{path}'), [5])
    with reverb.ReplayIterator(f'unix:{path}', 't', batch_size=1) as iterator:
      np.testing.assert_array_equal(next(iterator).data['x'], [[5, 5]])


def test_tcp_and_the_unix_socket_serve_the_same_tables(path):
  with reverb.Server([table()], port=0, unix_socket_path=path) as server:
    assert isinstance(server.port, int) and server.port > 0
    # A TCP port is there, so the local client takes it.
    assert server.localhost_client().server_address.startswith('localhost:')
    write(reverb.Client(f'unix:{path}'), range(2))
    tcp = reverb.Client(f'localhost:{server.port}')
    assert tcp.server_info(timeout=TIMEOUT)['t'].current_size == 2
    assert sample_steps(tcp, 2) == [0, 1]


def test_a_sharded_client_over_unix_sockets(tmp_path):
  paths = [str(tmp_path / f'shard{i}.sock') for i in range(2)]
  servers = [reverb.Server([table()], port=None, unix_socket_path=p)
             for p in paths]
  try:
    for i, p in enumerate(paths):
      write(reverb.Client(f'unix:{p}'), range(5 * i, 5 * i + 5))
    client = reverb.Client([f'unix:{p}' for p in paths])
    sizes = [info['t'].current_size
             for info in client.shard_info(timeout=TIMEOUT).values()]
    assert sizes == [5, 5]
    assert sorted(sample_steps(client, 10)) == list(range(10))
  finally:
    for server in servers:
      server.stop()


def test_stop_and_collection_remove_the_socket_file(path):
  server = reverb.Server([table()], port=None, unix_socket_path=path)
  assert is_socket(path)
  server.stop()
  assert not os.path.lexists(path)

  server = reverb.Server([table()], port=None, unix_socket_path=path)
  assert is_socket(path)
  del server
  gc.collect()
  assert not os.path.lexists(path)


def run_python(code, *args, **kwargs):
  return subprocess.Popen(
      [sys.executable, '-c', textwrap.dedent(code)] + [str(a) for a in args],
      **kwargs)


SERVER = """
  import sys, threading, time, reverb
  server = reverb.Server([reverb.Table.queue('q', 10)], port=None,
                         unix_socket_path=sys.argv[1])
  # A daemon thread holds the server at exit, so it is never collected.
  threading.Thread(target=lambda s=server: time.sleep(3600),
                   daemon=True).start()
  print('up', flush=True)
  if sys.argv[2] == 'wait':
    sys.stdin.read()
"""


def test_interpreter_exit_removes_the_socket_file(path):
  process = run_python(SERVER, path, 'exit', stdout=subprocess.PIPE,
                       text=True)
  assert process.stdout.readline() == 'up\n'
  assert process.wait(TIMEOUT) == 0
  assert not os.path.lexists(path)


def test_a_killed_servers_stale_socket_is_replaced(path):
  process = run_python(SERVER, path, 'wait', stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True)
  try:
    assert process.stdout.readline() == 'up\n'
  finally:
    process.kill()
    process.wait(TIMEOUT)
  assert is_socket(path)  # Nobody removed it.
  with reverb.Server([table()], port=None, unix_socket_path=path) as server:
    write(server.localhost_client(), [4])
    assert sample_steps(server.localhost_client(), 1) == [4]


def test_a_regular_file_is_an_error_and_stays(path):
  pathlib.Path(path).write_text('data')
  with pytest.raises(ValueError, match='not a socket'):
    reverb.Server([table()], port=None, unix_socket_path=path)
  assert pathlib.Path(path).read_text() == 'data'


def test_a_live_servers_socket_is_not_taken(path):
  with reverb.Server([table()], port=None, unix_socket_path=path) as server:
    with pytest.raises(RuntimeError, match='already listening'):
      reverb.Server([table()], port=None, unix_socket_path=path)
    write(server.localhost_client(), [1])  # The first one still serves.


def test_too_long_a_path_or_a_missing_directory_is_an_error(tmp_path):
  with pytest.raises(ValueError, match='at most'):
    reverb.Server([table()], port=None,
                  unix_socket_path=str(tmp_path / ('x' * 120)))
  with pytest.raises(ValueError, match='directory does not exist'):
    reverb.Server([table()], port=None,
                  unix_socket_path=str(tmp_path / 'missing' / 'reverb.sock'))


CONFIG = """
tables: {
  table_name: "t"
  sampler: { fifo: true }
  remover: { fifo: true }
  max_size: 1000
  max_times_sampled: 1
  rate_limiter: {
    samples_per_insert: 1.0
    min_size_to_sample: 1
    min_diff: -1.7976931348623157e+308
    max_diff: 1.7976931348623157e+308
  }
}
"""

WRITER = """
  import sys, numpy as np, reverb
  client = reverb.Client(sys.argv[1])
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for t in range(50):
      writer.append({'x': np.full([2], t, np.int32)})
      writer.create_item('t', 1.0, {'x': writer.history['x'][-1]})
"""

SAMPLER = """
  import sys, reverb
  client = reverb.Client(sys.argv[1])
  steps = [int(s.data[0][0]) for s in client.sample(
      't', num_samples=50, timeout=60, emit_timesteps=False)]
  assert steps == list(range(50)), steps
"""


def test_command_serves_other_processes_over_its_unix_socket(path):
  server = subprocess.Popen(
      [str(_BIN / 'reverb_server'), '--config', CONFIG,
       '--unix_socket_path', path], stdout=subprocess.PIPE, text=True)
  try:
    assert server.stdout.readline() == (
        f'Reverb server listening on unix:{path}\n')
    target = f'unix:{path}'
    writer = run_python(WRITER, target)
    assert writer.wait(TIMEOUT) == 0
    sampler = run_python(SAMPLER, target)
    assert sampler.wait(TIMEOUT) == 0
    server.send_signal(signal.SIGINT)
    assert server.wait(TIMEOUT) == 0
    assert not os.path.lexists(path)
  finally:
    if server.poll() is None:
      server.kill()
    server.wait(TIMEOUT)
