"""Every call and constructor ends within a bound against (a) an address
where no server runs, (b) a server frozen (SIGSTOP) after the client
connected, (c) a server frozen before the client connected.

The bounds, as documented (python/reverb/client.py, docs/concepts.md):
- a call given a timeout T ends by T plus SampleStream's 1 s grace for the
  server's own answer, whatever the server does, with DeadlineExceededError.
  Its client has no keepalive (`keepalive_ms=0`), so that the timeout alone
  must end it;
- a call without a timeout ends with RuntimeError (UNAVAILABLE): with no
  server, or one frozen before connecting, once kConnectTimeout (10 s) has
  passed without a connection; on a connection whose server froze, once the
  keepalive pings (KEEPALIVE_MS here) go unanswered, about 2 * KEEPALIVE_MS,
  plus the 10 s the writers and samplers keep trying to reconnect.
A cell fails only when its call outlives three times its bound (or ends
with another exception), never for being fast. All cells of a scenario run
at once, in threads, so the matrix takes about the longest bound.

The datasets' cells are in tests/python/tf/bounded_datasets_test.py; the
server side (streams of frozen clients are dropped) and the network cuts
are at the end of this file.
"""

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Callable, Dict, Optional

import numpy as np
import pytest

import reverb
from reverb import errors

KEEPALIVE_MS = 1000
TIMEOUT_S = 2.0
GRACE_S = 1.0  # SampleStream::kServerGrace.
CONNECT_S = 10.0  # kConnectTimeout.
# What a call without a timeout may take after its server froze: keepalive,
# then a writer's or sampler's reconnect attempts.
FROZEN_S = 2 * KEEPALIVE_MS / 1000 + CONNECT_S
SLACK = 3

SERVER = """
import sys
import numpy as np
import reverb
tables = [reverb.Table(name, reverb.selectors.Uniform(),
                       reverb.selectors.Fifo(), 1000,
                       reverb.rate_limiters.MinSize(1))
          for name in ('table', 'empty')]
server = reverb.Server(tables)
reverb.Client(f'localhost:{server.port}').insert(
    np.zeros([3], np.float32), {'table': 1.0})
print(server.port, flush=True)
sys.stdin.read()
"""


class ServerProcess:
  """A reverb.Server in a process of its own (one item in 'table', none in
  'empty'), which the test can freeze; `close` always thaws and kills it."""

  def __init__(self, env: Optional[Dict[str, str]] = None, prefix=()):
    self._proc = subprocess.Popen(
        [*prefix, sys.executable, '-c', SERVER], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, env=env)
    line = self._proc.stdout.readline()
    assert line, f'the server did not start ({self._proc.wait()})'
    self.port = int(line)

  def freeze(self):
    """Stops the process; returns once every thread of it has stopped."""
    os.kill(self._proc.pid, signal.SIGSTOP)
    tasks = f'/proc/{self._proc.pid}/task'
    deadline = time.monotonic() + 30
    while not all(_stopped(f'{tasks}/{t}/stat') for t in os.listdir(tasks)):
      assert time.monotonic() < deadline, 'the server did not stop'
      time.sleep(0.001)

  def close(self):
    if self._proc.poll() is None:
      os.kill(self._proc.pid, signal.SIGCONT)
      self._proc.kill()
    self._proc.wait(timeout=30)


def _stopped(stat_path: str) -> bool:
  with open(stat_path) as f:
    # "pid (comm) state ...", and comm may hold spaces or parentheses.
    return f.read().rsplit(')', 1)[1].split()[0] == 'T'


def free_port() -> int:
  """A loopback port where nothing listens."""
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


def step():
  return np.zeros([3], np.float32)


@dataclasses.dataclass
class Cell:
  """One call: `prepare(client, connected)` returns the call to time. With
  `connected` (scenario b) it may first use the live server, so that the
  call runs on an established connection or stream."""
  name: str
  prepare: Callable[[reverb.Client, bool], Callable[[], Any]]
  timeout: bool = False  # The call is given TIMEOUT_S.
  # Per scenario, where the exception differs from the rule above.
  expected: Dict[str, type] = dataclasses.field(default_factory=dict)
  # Per scenario, where the bound differs from the rule above.
  bound: Dict[str, float] = dataclasses.field(default_factory=dict)


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
      # One sample in flight: the call takes the one queued, then waits.
      iterator = reverb.ReplayIterator(
          address, 'table', 1, keepalive_ms=keepalive,
          max_in_flight_samples_per_worker=1, **kwargs)
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
    # Without a connection create_item cannot fetch the table's signature:
    # the connect bound, before flush starts.
    Cell('Writer.flush(timeout)',
         _legacy_writer(lambda w: w.flush(timeout=TIMEOUT_S)), timeout=True,
         expected={'no_server': RuntimeError, 'frozen_before': RuntimeError},
         bound={'no_server': CONNECT_S, 'frozen_before': CONNECT_S}),
    Cell('ReplayIterator()', _iterator_constructor),
    Cell('ReplayIterator next', _iterator()),
    # The rate limiter's timeout ends the iteration; with no connection the
    # sampler's reconnect window (10 s) ends it with an error.
    Cell('ReplayIterator next(rate_limiter_timeout_ms)',
         _iterator(rate_limiter_timeout_ms=_TIMEOUT_MS), timeout=True,
         expected={'frozen_after': StopIteration,
                   'no_server': RuntimeError, 'frozen_before': RuntimeError},
         bound={'no_server': CONNECT_S + 2, 'frozen_before': CONNECT_S + 2}),
]
SCENARIOS = ('no_server', 'frozen_after', 'frozen_before')


def expectation(cell: Cell, scenario: str):
  """(exception type, bound in seconds) of `cell` in `scenario`."""
  if cell.timeout:
    kind, bound = errors.DeadlineExceededError, TIMEOUT_S + GRACE_S
  else:
    kind = RuntimeError
    bound = FROZEN_S if scenario == 'frozen_after' else CONNECT_S + 2
  return cell.expected.get(scenario, kind), cell.bound.get(scenario, bound)


@dataclasses.dataclass
class Outcome:
  seconds: Optional[float] = None  # None: still running at the limit.
  error: Optional[BaseException] = None


def run_cells(scenario: str, address: str, freeze: Callable[[], None]):
  """Runs every cell against `address` at once; `freeze` is called once the
  cells have prepared (scenario b) or before (a, c). The outcome of each."""
  connected = scenario == 'frozen_after'
  if not connected:
    freeze()
  calls = {}
  for cell in CELLS:
    client = reverb.Client(address, keepalive_ms=0 if cell.timeout
                           else KEEPALIVE_MS)
    calls[cell.name] = cell.prepare(client, connected)
  if connected:
    freeze()
  outcomes = {name: Outcome() for name in calls}

  def run(name):
    start = time.monotonic()
    try:
      calls[name]()
    except BaseException as e:  # pylint: disable=broad-except
      outcomes[name].error = e
    outcomes[name].seconds = time.monotonic() - start

  threads = [threading.Thread(target=run, args=(name,), daemon=True)
             for name in calls]
  for thread in threads:
    thread.start()
  limit = time.monotonic() + SLACK * max(
      expectation(cell, scenario)[1] for cell in CELLS)
  for thread in threads:
    thread.join(max(0, limit - time.monotonic()))
  return outcomes


@pytest.fixture(name='matrix', scope='module')
def matrix_fixture():
  """The outcomes of every cell, by scenario (the three run in parallel)."""
  servers = []
  results = {}
  try:
    frozen_after = ServerProcess()
    frozen_before = ServerProcess()
    servers += [frozen_after, frozen_before]
    targets = {
        'no_server': (f'localhost:{free_port()}', lambda: None),
        'frozen_after': (f'localhost:{frozen_after.port}',
                         frozen_after.freeze),
        'frozen_before': (f'localhost:{frozen_before.port}',
                          frozen_before.freeze),
    }

    def run(scenario):
      address, freeze = targets[scenario]
      results[scenario] = run_cells(scenario, address, freeze)

    threads = [threading.Thread(target=run, args=(s,)) for s in SCENARIOS]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
    yield results
  finally:
    for server in servers:
      server.close()


@pytest.mark.parametrize('scenario', SCENARIOS)
@pytest.mark.parametrize('cell', CELLS, ids=[c.name for c in CELLS])
def test_call_ends_within_its_bound(matrix, cell, scenario):
  assert scenario in matrix, 'the scenario did not run'
  outcome = matrix[scenario][cell.name]
  kind, bound = expectation(cell, scenario)
  print(f'{cell.name} / {scenario}: {outcome.seconds} s, {outcome.error!r}')
  assert outcome.seconds is not None, (
      f'still running after {SLACK * bound:.0f} s (bound {bound:.0f} s)')
  assert outcome.seconds <= SLACK * bound, (
      f'took {outcome.seconds:.1f} s (bound {bound:.0f} s)')
  assert isinstance(outcome.error, kind), (
      f'ended with {outcome.error!r} after {outcome.seconds:.1f} s, '
      f'expected {kind.__name__}')


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
