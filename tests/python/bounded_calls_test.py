"""Every call and constructor of the issue's list ends within its bound
against no server, a server frozen after the client connected and one
frozen before (the matrix and its bounds: bounded_matrix.py). The datasets'
cells are in tf/bounded_datasets_test.py. Then: a call waiting on a live
server's rate limiter is not cut by the keepalive, the server drops the
streams of a frozen client, and calls end when the network to the server
is cut (network namespaces; skipped with the reason where they cannot be
made).
"""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import reverb
from reverb import errors
from bounded_matrix import Cell, KEEPALIVE_MS, SCENARIOS, SLACK, TIMEOUT_S
from bounded_matrix import FROZEN_S, GRACE_S, ServerProcess
from bounded_matrix import check, free_port, run_matrix, step

def _sample(timeout=None, table='table'):
  def prepare(client, connected):
    if connected:  # The stream is kept for the next call.
      list(client.sample(table, 1, timeout=timeout))
    return lambda: list(client.sample(table, 1, timeout=timeout))
  return prepare


def _warmed(call):
  """`call(client)`, after a ServerInfo call that connects the client."""
  def prepare(client, connected):
    if connected:
      client.server_info()
    return lambda: call(client)
  return prepare


def _trajectory_writer(finish, validate=True):
  def prepare(client, connected):
    def write(writer):
      writer.append({'x': step()})
      writer.create_item('table', 1.0, {'x': writer.history['x'][-1]})
      finish(writer)
    if connected:
      writer = client.trajectory_writer(1, validate_items=validate)
      write(writer)
      return lambda: write(writer)
    return lambda: write(client.trajectory_writer(1, validate_items=validate))
  return prepare


def _legacy_writer(finish):
  def prepare(client, connected):
    def write(writer):
      writer.append(step())
      writer.create_item('table', 1, 1.0)
      finish(writer)
    if connected:
      writer = client.writer(1)
      write(writer)
      return lambda: write(writer)
    return lambda: write(client.writer(1))
  return prepare


def _iterator(**kwargs):
  def prepare(client, connected):
    address = client.server_address
    keepalive = 0 if 'rate_limiter_timeout_ms' in kwargs else KEEPALIVE_MS
    if connected:
      # One sample in flight (exactly: no byte budget to draw small ones
      # further ahead): the call takes the one queued, then waits.
      iterator = reverb.ReplayIterator(
          address, 'table', 1, keepalive_ms=keepalive,
          max_in_flight_samples_per_worker=1,
          max_in_flight_bytes_per_worker=0, **kwargs)
      next(iterator)
      return lambda: [next(iterator) for _ in range(3)]
    return lambda: next(reverb.ReplayIterator(
        address, 'table', 1, keepalive_ms=keepalive,
        unpack_as_table_signature=False, **kwargs))
  return prepare


def _iterator_constructor(client, connected):
  del connected  # It makes a client of its own: a new connection.
  return lambda: reverb.ReplayIterator(client.server_address, 'table', 1)


_TIMEOUT_MS = int(TIMEOUT_S * 1000)
CELLS = [
    Cell('sample', _sample()),
    Cell('sample(timeout)', _sample(TIMEOUT_S), timeout=True),
    Cell('insert', _warmed(lambda c: c.insert(step(), {'table': 1.0}))),
    Cell('mutate_priorities',
         _warmed(lambda c: c.mutate_priorities('table', {1: 1.0}))),
    Cell('mutate_priorities(timeout)',
         _warmed(lambda c: c.mutate_priorities('table', {1: 1.0},
                                               timeout=TIMEOUT_S)),
         timeout=True),
    Cell('reset', _warmed(lambda c: c.reset('empty'))),
    Cell('reset(timeout)',
         _warmed(lambda c: c.reset('empty', timeout=TIMEOUT_S)), timeout=True),
    Cell('server_info', _warmed(lambda c: c.server_info())),
    Cell('server_info(timeout)',
         _warmed(lambda c: c.server_info(TIMEOUT_S)), timeout=True),
    Cell('checkpoint', _warmed(lambda c: c.checkpoint())),
    # Checkpoint fails fast (without waiting for the server to be ready).
    Cell('checkpoint(timeout)',
         _warmed(lambda c: c.checkpoint(timeout=TIMEOUT_S)), timeout=True,
         expected={'no_server': RuntimeError}),
    Cell('trajectory_writer + flush',
         _trajectory_writer(lambda w: w.flush())),
    Cell('TrajectoryWriter.flush(timeout)',
         _trajectory_writer(lambda w: w.flush(timeout_ms=_TIMEOUT_MS),
                            validate=False), timeout=True),
    Cell('TrajectoryWriter.end_episode(timeout)',
         _trajectory_writer(lambda w: w.end_episode(timeout_ms=_TIMEOUT_MS),
                            validate=False), timeout=True),
    Cell('writer + create_item + flush', _legacy_writer(lambda w: w.flush())),
    # Without a connection create_item holds the item (it cannot fetch the
    # table's signature) for flush to check within its timeout.
    Cell('Writer.flush(timeout)',
         _legacy_writer(lambda w: w.flush(timeout=TIMEOUT_S)), timeout=True),
    Cell('ReplayIterator()', _iterator_constructor),
    Cell('ReplayIterator next', _iterator()),
    # The rate limiter's timeout ends the iteration; with no connection it
    # ends the sampler's reconnects too, with an error.
    Cell('ReplayIterator next(rate_limiter_timeout_ms)',
         _iterator(rate_limiter_timeout_ms=_TIMEOUT_MS), timeout=True,
         expected={'frozen_after': StopIteration,
                   'no_server': RuntimeError, 'frozen_before': RuntimeError}),
]
@pytest.fixture(name='matrix', scope='module')
def matrix_fixture():
  with run_matrix(CELLS) as outcomes:
    yield outcomes


@pytest.mark.parametrize('scenario', SCENARIOS)
@pytest.mark.parametrize('cell', CELLS, ids=[c.name for c in CELLS])
def test_call_ends_within_its_bound(matrix, cell, scenario):
  assert scenario in matrix, 'the scenario did not run'
  check(matrix[scenario][cell.name], cell, scenario)


def test_a_call_waiting_on_a_live_rate_limiter_outlasts_the_keepalive():
  """Keepalive drops only servers that do not answer: a sample that waits
  for an item, on a live server, waits past many keepalive intervals (and
  pings every 300 ms are no "too many pings" for the server)."""
  server = reverb.Server([reverb.Table(
      'empty', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10,
      reverb.rate_limiters.MinSize(1))])
  client = reverb.Client(f'localhost:{server.port}', keepalive_ms=300)
  result = {}

  def sample():
    try:
      result['sample'] = list(client.sample('empty', 1))
    except BaseException as e:  # pylint: disable=broad-except
      result['error'] = e

  thread = threading.Thread(target=sample, daemon=True)
  thread.start()
  thread.join(10 * 2 * 0.3)  # Ten times the keepalive bound.
  assert thread.is_alive(), f'the sample ended early: {result}'
  client.insert(step(), {'empty': 1.0})
  thread.join(60)
  assert 'error' not in result, result
  assert len(result['sample']) == 1
  server.stop()


CLIENT = """
import sys
import numpy as np
import reverb
client = reverb.Client(sys.argv[1])
writer = client.trajectory_writer(1)
writer.append({'x': np.zeros([3], np.float32)})
writer.create_item('table', 1.0, {'x': writer.history['x'][-1]})
writer.flush()
samples = client.sample('empty', 1)
print('ready', flush=True)
next(samples)
"""


def test_the_server_drops_the_streams_of_a_frozen_client(monkeypatch):
  """A client process with an open insert stream and a sample stream
  waiting on the rate limiter is frozen: the server's keepalive cancels
  both within its bound, and their reactors finish."""
  monkeypatch.setenv('REVERB_KEEPALIVE_MS', str(KEEPALIVE_MS))
  server = reverb.Server([reverb.Table(
      name, reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10,
      reverb.rate_limiters.MinSize(1)) for name in ('table', 'empty')])
  monkeypatch.delenv('REVERB_KEEPALIVE_MS')
  streams = lambda: server._server.num_open_streams  # pylint: disable=protected-access
  env = dict(os.environ, REVERB_KEEPALIVE_MS='0')  # The client never pings.
  client = subprocess.Popen(
      [sys.executable, '-c', CLIENT, f'localhost:{server.port}'],
      stdout=subprocess.PIPE, text=True, env=env)
  try:
    assert client.stdout.readline() == 'ready\n'
    deadline = time.monotonic() + 30
    while streams() < 2:
      assert time.monotonic() < deadline, f'{streams()} streams open'
      time.sleep(0.01)
    os.kill(client.pid, signal.SIGSTOP)
    start = time.monotonic()
    limit = start + SLACK * 2 * KEEPALIVE_MS / 1000
    while streams() > 0 and time.monotonic() < limit:
      time.sleep(0.01)
    assert streams() == 0, (
        f'{streams()} streams still open {time.monotonic() - start:.1f} s '
        'after the client froze')
    # The table is unharmed: the item is there, and it serves again.
    assert server.localhost_client().server_info()['table'].current_size == 1
  finally:
    os.kill(client.pid, signal.SIGCONT)
    client.kill()
    client.wait(timeout=30)
    server.stop()


CUT_CLIENT = """
import json, sys, threading, time
import numpy as np
import reverb
address, keepalive_ms = sys.argv[1], int(sys.argv[2])
client = reverb.Client(address, keepalive_ms=keepalive_ms)
timeout_client = reverb.Client(address, keepalive_ms=0)
list(client.sample('table', 1))
list(timeout_client.sample('table', 1, timeout=1))
writer = client.trajectory_writer(1)
def write():
  writer.append({'x': np.zeros([3], np.float32)})
  writer.create_item('table', 1.0, {'x': writer.history['x'][-1]})
  writer.flush()
write()
iterator = reverb.ReplayIterator(address, 'table', 1, keepalive_ms=keepalive_ms,
                                 max_in_flight_samples_per_worker=1,
                                 max_in_flight_bytes_per_worker=0)
next(iterator)
calls = {
    'sample': lambda: list(client.sample('table', 1)),
    'sample(timeout)': lambda: list(timeout_client.sample(
        'table', 1, timeout=float(sys.argv[3]))),
    'TrajectoryWriter.flush': write,
    'ReplayIterator next': lambda: [next(iterator) for _ in range(3)],
}
print('ready', flush=True)
sys.stdin.readline()
results = {}
def run(name):
  start = time.monotonic()
  try:
    calls[name]()
    error = None
  except BaseException as e:
    error = type(e).__name__
  results[name] = [time.monotonic() - start, error]
threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in calls]
for t in threads:
  t.start()
for t in threads:
  t.join(float(sys.argv[4]))
print(json.dumps(results), flush=True)
"""


def test_calls_end_when_the_network_to_the_server_is_cut():
  """Server and client on two hosts (network namespaces joined by a veth
  pair); the link goes down under open streams and calls, and no packet
  (not even a reset) arrives: every call ends within its bound, as with a
  frozen server."""
  import multihost_test  # pylint: disable=g-import-not-at-top
  reason = multihost_test._namespaces_unavailable()  # pylint: disable=protected-access
  if reason:
    pytest.skip(f'network cuts need network namespaces: {reason}')
  prefix = f'rvbcut{os.getpid() % 10000}'
  client_ns, server_ns = f'{prefix}c', f'{prefix}s'
  ip = lambda *args: subprocess.run(['ip', *args], check=True,
                                    capture_output=True, timeout=30)
  made, server, client = [], None, None
  try:
    for ns in (client_ns, server_ns):
      ip('netns', 'add', ns)
      made.append(ns)
      ip('-n', ns, 'link', 'set', 'lo', 'up')
    ip('-n', client_ns, 'link', 'add', 'h0', 'type', 'veth', 'peer', 'name',
       'eth0', 'netns', server_ns)
    ip('-n', client_ns, 'addr', 'add', '10.79.0.1/24', 'dev', 'h0')
    ip('-n', server_ns, 'addr', 'add', '10.79.0.2/24', 'dev', 'eth0')
    ip('-n', client_ns, 'link', 'set', 'h0', 'up')
    ip('-n', server_ns, 'link', 'set', 'eth0', 'up')
    server = ServerProcess(
        env=dict(os.environ, REVERB_BIND_ADDRESS='0.0.0.0'),
        prefix=['ip', 'netns', 'exec', server_ns])
    limit = SLACK * FROZEN_S
    client = subprocess.Popen(
        ['ip', 'netns', 'exec', client_ns, sys.executable, '-c', CUT_CLIENT,
         f'10.79.0.2:{server.port}', str(KEEPALIVE_MS), str(TIMEOUT_S),
         str(limit)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline() == 'ready\n'
    ip('-n', server_ns, 'link', 'set', 'eth0', 'down')
    client.stdin.write('go\n')
    client.stdin.flush()
    results = json.loads(client.stdout.readline())
    expected = {
        'sample': ('RuntimeError', FROZEN_S),
        'sample(timeout)': ('DeadlineExceededError', TIMEOUT_S + GRACE_S),
        'TrajectoryWriter.flush': ('RuntimeError', FROZEN_S),
        'ReplayIterator next': ('RuntimeError', FROZEN_S),
    }
    for name, (kind, bound) in expected.items():
      assert name in results, f'{name}: still running after {limit:.0f} s'
      seconds, error = results[name]
      assert seconds <= SLACK * bound and error == kind, (
          f'{name}: {error} after {seconds:.1f} s, expected {kind} within '
          f'{SLACK * bound:.0f} s')
  finally:
    if client is not None:
      client.kill()
      client.wait(timeout=30)
    if server is not None:
      server.close()
    for ns in reversed(made):
      subprocess.run(['ip', 'netns', 'del', ns], capture_output=True,
                     timeout=30)


def test_keepalive_ms_is_checked_and_survives_pickling():
  import pickle  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match='keepalive_ms'):
    reverb.Client('localhost:1', keepalive_ms=-1)
  client = pickle.loads(pickle.dumps(
      reverb.Client('localhost:1', keepalive_ms=1234)))
  assert client._keepalive_ms == 1234  # pylint: disable=protected-access
  assert client.server_address == 'localhost:1'


def test_a_writer_deleted_with_items_held_for_no_server_does_not_wait(
    caplog):
  # close() would wait up to 10 s for the server, to check the held item; a
  # finalizer, which runs wherever the garbage collector does, drops it.
  writer = reverb.Client(f'localhost:{free_port()}', keepalive_ms=0).writer(1)
  writer.append(np.zeros([3], np.float32))
  writer.create_item('signed', 1, 1.0)
  start = time.monotonic()
  del writer
  gc.collect()
  assert time.monotonic() - start < 5
  assert 'Dropping 1 items held for a server that is not connected.' in (
      caplog.text)


def test_items_held_without_a_server_are_checked_by_flush():
  # create_item cannot fetch the signature yet: it holds the items.
  port = free_port()
  writer = reverb.Client(f'localhost:{port}', keepalive_ms=0).writer(1)
  writer.append(np.zeros([3], np.float32))
  writer.create_item('signed', 1, 1.0)
  writer.append(np.zeros([4], np.float32))  # Not the signature's shape.
  writer.create_item('signed', 1, 1.0)
  with pytest.raises(errors.DeadlineExceededError):
    writer.flush(timeout=0.2)
  server = reverb.Server([reverb.Table.queue(
      'signed', 10,
      signature=reverb.specs.TensorSpec([3], np.float32))], port=port)
  try:
    # The held item that does not match is dropped, with its error; the
    # other is sent.
    with pytest.raises(ValueError, match='signature'):
      writer.flush(timeout=30)
    writer.flush(timeout=30)
    writer.close()
    assert server.localhost_client().server_info(
        timeout=30)['signed'].current_size == 1
  finally:
    server.stop()
