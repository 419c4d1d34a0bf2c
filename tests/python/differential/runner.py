"""Runs one module of differential scenarios with whichever `reverb` this
interpreter imports, and prints their outcomes as one `RESULT {json}` line.

    python runner.py client        # runs scenarios_client.py

differential_test.py runs it twice, with our package and (`python -I`) with
dm-reverb 0.14 from `.venv-dmreverb`, and compares the two outcomes of every
scenario.

A scenario module holds functions `scenario_<name>(reverb, env)`, run in the
order they are defined; it imports only the standard library, numpy and
`scenario_util` (the helpers the modules share) at its top (the reverb
module, and TensorFlow through `env.tf`, are handed in). A scenario's
outcome is either what it returns (made JSON: numpy values become lists and
numbers, tuples lists, dict keys strings) or, if it raises, `{'raised':
class name, 'builtins': the builtin exception classes it is an instance of,
'message': str(exception)}`. Server addresses from `env.server` read
`ADDRESS` in every outcome, so messages that name them compare equal.
"""

import errno
import faulthandler
import importlib
import json
import os
import random
import re
import socket
import sys
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
# `python -I` leaves the script's folder out of sys.path: the scenario modules
# and scenario_util are imported from it.
if _HERE not in sys.path:
  sys.path.insert(0, _HERE)

from scenario_util import error_outcome  # pylint: disable=wrong-import-position

RESULT_PREFIX = 'RESULT '
# The whole module's run is bounded; a hang dumps every thread's stack.
_WATCHDOG_SECONDS = 240
# "LOW-HIGH": the ports `Env.server` gives its servers. The two packages run
# side by side, each in a range of its own below the kernel's ephemeral ports
# (32768 and up): a server of one then never takes a port the other picked,
# nor a port a client connection holds (dm-reverb's portpicker and a port-0
# bind both draw from the ephemeral range, and the picked port is free only
# until someone else binds it).
PORTS_ENV = 'DIFFERENTIAL_PORTS'
PORTS_OURS = '20000-25999'
PORTS_DMREVERB = '26000-31999'


def _port_is_free(port: int) -> bool:
  """Whether `port` can be bound on every address of both IP families (of
  IPv4 alone where this host has no IPv6)."""
  try:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
      sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
      sock.bind(('::', port))
    return True
  except OSError as e:
    if e.errno == errno.EADDRINUSE:
      return False
  try:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
      sock.bind(('0.0.0.0', port))
    return True
  except OSError:
    return False


class _Ports:
  """Hands out free ports of the range in PORTS_ENV, each once."""

  def __init__(self, spec: str):
    low, high = (int(p) for p in spec.split('-'))
    self._ports = list(range(low, high + 1))
    random.shuffle(self._ports)

  def take(self) -> int:
    while self._ports:
      port = self._ports.pop()
      if _port_is_free(port):
        return port
    raise RuntimeError(f'no free port left in {PORTS_ENV}')


_PORTS = _Ports(os.environ.get(PORTS_ENV, PORTS_OURS))


class Env:
  """What a scenario may ask of the runner."""

  def __init__(self, reverb):
    self._reverb = reverb
    self._servers = []
    self.addresses = []

  @property
  def tf(self):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf

  def server(self, tables, **kwargs) -> str:
    """Starts a server of this package holding `tables` (on a port of
    PORTS_ENV unless `port` is given); its address. The server stops when the
    scenario ends."""
    kwargs.setdefault('port', _PORTS.take())
    server = self._reverb.Server(tables=tables, **kwargs)
    self._servers.append(server)
    address = f'localhost:{server.port}'
    self.addresses.append(address)
    return address

  def close(self):
    for server in self._servers:
      server.stop()
    self._servers = []


def _jsonable(value):
  """`value` as JSON values (numpy included), recursively."""
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if hasattr(value, 'tolist'):  # numpy arrays and scalars
    return _jsonable(value.tolist())
  if isinstance(value, bytes):
    return value.decode('utf-8', 'backslashreplace')
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  return repr(value)


def _normalize(outcome, addresses):
  text = json.dumps(outcome, sort_keys=True)
  for address in addresses:
    for spelling in (address, address.replace('localhost', '127.0.0.1')):
      # Not followed by a digit: localhost:4321 is not in localhost:43210.
      text = re.sub(re.escape(spelling) + r'(?!\d)', 'ADDRESS', text)
  return json.loads(text)


def scenario_names(module) -> list:
  """The scenarios of `module`, in definition order."""
  return [name[len('scenario_'):] for name in vars(module)
          if name.startswith('scenario_') and callable(getattr(module, name))]


def run(module_name: str) -> dict:
  import reverb  # pylint: disable=g-import-not-at-top
  module = importlib.import_module(f'scenarios_{module_name}')
  outcomes = {}
  for name in scenario_names(module):
    env = Env(reverb)
    try:
      outcome = _jsonable(getattr(module, f'scenario_{name}')(reverb, env))
    except Exception as e:  # pylint: disable=broad-except
      outcome = error_outcome(e)
      if os.environ.get('DIFFERENTIAL_TRACEBACKS'):
        traceback.print_exc()
    finally:
      env.close()
    outcomes[name] = _normalize(outcome, env.addresses)
  return outcomes


def main():
  faulthandler.dump_traceback_later(_WATCHDOG_SECONDS, exit=True)
  outcomes = run(sys.argv[1])
  print(RESULT_PREFIX + json.dumps(outcomes, sort_keys=True), flush=True)
  # Some packages' threads outlive their objects; do not wait for them.
  sys.stdout.flush()
  os._exit(0)  # pylint: disable=protected-access


if __name__ == '__main__':
  main()
