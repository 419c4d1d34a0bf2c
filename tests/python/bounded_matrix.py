"""The bounded-calls matrix: calls ("cells") run against (a) an address
where no server runs, (b) a server frozen (SIGSTOP) after the client
connected, (c) a server frozen before the client connected, each timed and
checked against its bound. Used by bounded_calls_test.py and
tf/bounded_datasets_test.py.

The bounds, as documented (docs/concepts.md, "Timeouts, dead and frozen
servers"):
- a call given a timeout T ends by T plus SampleStream's 1 s grace for the
  server's own answer, whatever the server does, with DeadlineExceededError.
  Its client has no keepalive (`keepalive_ms=0`), so that the timeout alone
  must end it;
- a call without a timeout ends with RuntimeError (UNAVAILABLE): with no
  server, or one frozen before connecting, once kConnectTimeout (10 s) has
  passed without a connection; on a connection whose server froze, once the
  keepalive pings (KEEPALIVE_MS here) go unanswered, about 2 * KEEPALIVE_MS,
  plus the 10 s the writers and samplers keep trying to reconnect.
A cell fails only when its call outlives SLACK times its bound (or ends
with another exception), never for being fast. All cells of all scenarios
run at once, in threads, so a matrix takes about its longest bound.
"""

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

import numpy as np

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
  # Per scenario, where the exception (a type or a tuple of them) differs
  # from the rule above.
  expected: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # Per scenario, where the bound differs from the rule above.
  bound: Dict[str, float] = dataclasses.field(default_factory=dict)


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


def run_cells(cells: Sequence[Cell], scenario: str, address: str,
              freeze: Callable[[], None]) -> Dict[str, Outcome]:
  """Runs `cells` against `address` at once; `freeze` is called once the
  cells have prepared (scenario b) or before (a, c). The outcome of each."""
  connected = scenario == 'frozen_after'
  if not connected:
    freeze()
  calls = {}
  for cell in cells:
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
      expectation(cell, scenario)[1] for cell in cells)
  for thread in threads:
    thread.join(max(0, limit - time.monotonic()))
  return outcomes


@contextlib.contextmanager
def run_matrix(cells: Sequence[Cell]) -> Iterator[Dict[str, Dict[str, Outcome]]]:
  """The outcomes of `cells`, by scenario and cell name (the three
  scenarios run in parallel); the servers are killed on exit."""
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
      results[scenario] = run_cells(cells, scenario, address, freeze)

    threads = [threading.Thread(target=run, args=(s,)) for s in SCENARIOS]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
    yield results
  finally:
    for server in servers:
      server.close()


def check(outcome: Outcome, cell: Cell, scenario: str):
  """Fails unless `outcome` is `cell`'s expected exception within SLACK
  times its bound."""
  kind, bound = expectation(cell, scenario)
  print(f'{cell.name} / {scenario}: {outcome.seconds} s, {outcome.error!r}')
  assert outcome.seconds is not None, (
      f'still running after {SLACK * bound:.0f} s (bound {bound:.0f} s)')
  assert outcome.seconds <= SLACK * bound, (
      f'took {outcome.seconds:.1f} s (bound {bound:.0f} s)')
  kinds = kind if isinstance(kind, tuple) else (kind,)
  assert isinstance(outcome.error, kinds), (
      f'ended with {outcome.error!r} after {outcome.seconds:.1f} s, '
      f'expected {" or ".join(k.__name__ for k in kinds)}')
