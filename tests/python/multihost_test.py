"""Shards on hosts of their own: each server in a network namespace, the
client in another, joined by veth links; cutting a host's link is a dead
shard, setting it up again lets the shard rejoin.

The hosts are network namespaces made for each test (named uniquely per
run): a client host `<prefix>c` and shard hosts `<prefix>s0`, ... Shard k
is linked to the client host by a veth pair, 10.77.k.1/24 on the client's
end and 10.77.k.2/24 on the shard's, where its server (a `reverb.Server`
process started with `ip netns exec`) listens. Nothing touches the
machine's own interfaces or addresses. The client side of each test runs in
the client host: an agent process (AGENT below) that takes JSON commands on
stdin and answers on stdout, so that the test cuts and restores links
(`ip link set ... down/up` on the shard's end) between its steps. Skipped
with the reason where namespaces cannot be made (not root, no `ip`, no
CAP_NET_ADMIN). Timeouts are generous and only guard against hangs.
"""

import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

import reverb

NUM_SHARDS = 3
_PORT = 7700  # Every host has its own network stack: the same port on each.
_TIMEOUT = 120  # Seconds: against hangs only.

SERVER = """
  import sys, reverb
  tables = [
      reverb.Table('uniform', sampler=reverb.selectors.Uniform(),
                   remover=reverb.selectors.Fifo(), max_size=10**6,
                   rate_limiter=reverb.rate_limiters.MinSize(1)),
      # Every item again, sampled once each: draining it lists the ids the
      # shard holds.
      reverb.Table('ledger', sampler=reverb.selectors.Fifo(),
                   remover=reverb.selectors.Fifo(), max_size=10**6,
                   max_times_sampled=1,
                   rate_limiter=reverb.rate_limiters.MinSize(1)),
  ]
  server = reverb.Server(tables, port=int(sys.argv[2]),
                         bind_address=sys.argv[1])
  print('LISTENING', flush=True)
  sys.stdin.read()
  server.stop()
"""

AGENT = """
  import json, sys, threading
  import numpy as np
  import reverb

  addresses = sys.argv[1:]
  TIMEOUT_MS = 60_000
  EPISODE = 20  # Items between end_episode calls, which confirm them.
  PAUSE = 0.05  # Seconds after each episode: the tables stay small.

  def ids_of(samples):
    return [int(np.asarray(s.data[0]).reshape(-1)[0]) for s in samples]

  class Writers:
    # `count` TrajectoryWriters in threads, writing items {'id': ...}
    # (writer n: ids n * 10**7, n * 10**7 + 1, ...) to both tables until
    # stopped, pausing after each episode; `confirmed[n]` counts those
    # end_episode has confirmed.
    def __init__(self, client, count):
      self.stop = threading.Event()
      self.confirmed = [0] * count
      self.errors = []
      # Daemons: an agent whose stdin closes mid-test exits at once.
      self.threads = [threading.Thread(target=self.run, args=(client, n),
                                       daemon=True) for n in range(count)]
      for thread in self.threads:
        thread.start()

    def run(self, client, n):
      try:
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
          written = 0
          while True:
            writer.append({'id': np.int64(n * 10**7 + written)})
            for table in ('uniform', 'ledger'):
              writer.create_item(table, 1.0, {'id': writer.history['id'][-1]})
            written += 1
            if written % EPISODE == 0:
              writer.end_episode(timeout_ms=TIMEOUT_MS)
              self.confirmed[n] = written
              if self.stop.wait(PAUSE):
                return
      except Exception as e:
        self.errors.append(f'writer {n}: {type(e).__name__}: {e}')

    def report(self):
      return {'confirmed': list(self.confirmed), 'errors': list(self.errors)}

  def shard_info():
    # Each shard asked alone: its table sizes, or the error's name.
    info = {}
    for address in addresses:
      try:
        tables = reverb.Client(address).server_info(timeout=3)
        info[address] = {name: t.current_size for name, t in tables.items()}
      except Exception as e:
        info[address] = type(e).__name__
    return info

  def drain():
    # The ids each shard holds (its ledger, read once).
    held = {}
    for address in addresses:
      client = reverb.Client(address)
      size = client.server_info(timeout=10)['ledger'].current_size
      held[address] = ids_of(client.sample('ledger', num_samples=size,
                                           emit_timesteps=False, timeout=30))
    return held

  client = None
  writers = None
  for line in sys.stdin:
    command = json.loads(line)
    op = command['op']
    try:
      if op == 'connect':
        client = reverb.Client(addresses)
        answer = {}
      elif op == 'insert':  # One item, on the shard given alone.
        reverb.Client(command['address']).insert(
            np.int64(command['id']), priorities={'uniform': 1.0})
        answer = {}
      elif op == 'shard_info':
        answer = shard_info()
      elif op == 'server_info':
        tables = client.server_info(timeout=command['timeout'])
        answer = {name: t.current_size for name, t in tables.items()}
      elif op == 'start_writers':
        writers = Writers(client, command['count'])
        answer = writers.report()
      elif op == 'progress':
        answer = writers.report()
      elif op == 'stop_writers':
        writers.stop.set()
        for thread in writers.threads:
          thread.join()
        answer = writers.report()
      elif op == 'sample':
        sampler = reverb.Client(addresses) if command['fresh'] else client
        answer = ids_of(sampler.sample('uniform', num_samples=command['n'],
                                       emit_timesteps=False, timeout=30))
      elif op == 'drain':
        answer = drain()
      reply = {'ok': answer}
    except Exception as e:
      reply = {'error': f'{type(e).__name__}: {e}'}
    print(json.dumps(reply), flush=True)
"""


def _ip(*args):
  subprocess.run(['ip', *args], check=True, capture_output=True, text=True,
                 timeout=30)


class Process:
  """`code` run by this interpreter in network namespace `netns`, talking in
  lines; stopped (stdin closed, then killed if need be) by `stop`."""

  def __init__(self, netns, code, *args):
    self._proc = subprocess.Popen(
        ['ip', 'netns', 'exec', netns, sys.executable, '-c',
         textwrap.dedent(code)] + [str(a) for a in args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

  def read_line(self):
    ready, _, _ = select.select([self._proc.stdout], [], [], _TIMEOUT)
    assert ready, f'no answer within {_TIMEOUT} s'
    line = self._proc.stdout.readline()
    assert line, f'the process ended (exit status {self._proc.wait()})'
    return line

  def send(self, line):
    self._proc.stdin.write(line + '\n')
    self._proc.stdin.flush()

  def stop(self):
    if self._proc.poll() is None:
      try:
        self._proc.stdin.close()
        self._proc.wait(timeout=20)
      except (OSError, subprocess.TimeoutExpired):
        self._proc.kill()
        self._proc.wait(timeout=20)


class Agent(Process):
  """The client host's agent: `call(op, **args)` returns its answer or fails
  the test with its error."""

  def __init__(self, netns, addresses):
    super().__init__(netns, AGENT, *addresses)

  def call(self, op, **args):
    self.send(json.dumps(dict(args, op=op)))
    reply = json.loads(self.read_line())
    assert 'error' not in reply, f'{op}: {reply["error"]}'
    return reply['ok']


class Hosts:
  """The client host and NUM_SHARDS shard hosts, each shard's server
  running; `close` removes them all (what was made, if made halfway)."""

  def __init__(self):
    prefix = f'rvb{os.getpid()}{secrets.token_hex(2)}'
    self.client = f'{prefix}c'
    self.shards = [f'{prefix}s{k}' for k in range(NUM_SHARDS)]
    self.addresses = [f'10.77.{k}.2:{_PORT}' for k in range(NUM_SHARDS)]
    self._made = []
    self._processes = []
    try:
      self._add_netns(self.client)
      for k, shard in enumerate(self.shards):
        self._add_netns(shard)
        _ip('-n', self.client, 'link', 'add', f'h{k}', 'type', 'veth',
            'peer', 'name', 'eth0', 'netns', shard)
        _ip('-n', self.client, 'addr', 'add', f'10.77.{k}.1/24', 'dev', f'h{k}')
        _ip('-n', shard, 'addr', 'add', f'10.77.{k}.2/24', 'dev', 'eth0')
        _ip('-n', self.client, 'link', 'set', f'h{k}', 'up')
        _ip('-n', shard, 'link', 'set', 'eth0', 'up')
      for k, shard in enumerate(self.shards):
        self._processes.append(Process(shard, SERVER, f'10.77.{k}.2', _PORT))
      for server in self._processes:
        assert server.read_line().strip() == 'LISTENING'
    except BaseException:
      self.close()
      raise

  def _add_netns(self, name):
    _ip('netns', 'add', name)
    self._made.append(name)
    _ip('-n', name, 'link', 'set', 'lo', 'up')

  def agent(self):
    """A new agent in the client host (stopped by `close`)."""
    agent = Agent(self.client, self.addresses)
    self._processes.append(agent)
    return agent

  def cut(self, shard):
    _ip('-n', self.shards[shard], 'link', 'set', 'eth0', 'down')

  def restore(self, shard):
    _ip('-n', self.shards[shard], 'link', 'set', 'eth0', 'up')

  def close(self):
    for process in reversed(self._processes):
      process.stop()
    for name in reversed(self._made):  # Its veth ends go with it.
      subprocess.run(['ip', 'netns', 'del', name], capture_output=True,
                     timeout=30)
    self._processes, self._made = [], []


def _namespaces_unavailable():
  """Why network namespaces cannot be made here, or None."""
  if shutil.which('ip') is None:
    return 'the `ip` command (iproute2) is missing'
  if os.geteuid() != 0:
    return 'network namespaces need root'
  probe = f'rvbprobe{os.getpid()}{secrets.token_hex(2)}'
  made = subprocess.run(['ip', 'netns', 'add', probe], capture_output=True,
                        text=True, timeout=30)
  if made.returncode != 0:
    return f'`ip netns add` failed (no CAP_NET_ADMIN?): {made.stderr.strip()}'
  subprocess.run(['ip', 'netns', 'del', probe], capture_output=True,
                 timeout=30)
  return None


@pytest.fixture(name='hosts')
def hosts_fixture():
  reason = _namespaces_unavailable()
  if reason:
    pytest.skip(f'multi-host tests need network namespaces: {reason}')
  hosts = Hosts()
  try:
    yield hosts
  finally:
    hosts.close()


def _sharded_client_missing():
  try:
    reverb.Client(['localhost:1', 'localhost:2'])
  except TypeError:
    return True
  return False


def _wait_until(condition, what):
  """Polls `condition()` until true; fails after _TIMEOUT seconds."""
  deadline = time.monotonic() + _TIMEOUT
  while not condition():
    assert time.monotonic() < deadline, f'{what}: not within {_TIMEOUT} s'
    time.sleep(0.2)


def test_each_host_is_reached_over_its_own_link_and_a_cut_link_isolates_it(
    hosts):
  agent = hosts.agent()
  for k, address in enumerate(hosts.addresses):
    for n in range(k + 1):
      agent.call('insert', address=address, id=100 * k + n)
  sizes = {address: k + 1 for k, address in enumerate(hosts.addresses)}
  assert {address: info['uniform'] for address, info in
          agent.call('shard_info').items()} == sizes

  hosts.cut(1)
  info = agent.call('shard_info')
  assert isinstance(info[hosts.addresses[1]], str), info  # An error's name.
  assert info[hosts.addresses[0]]['uniform'] == 1
  assert info[hosts.addresses[2]]['uniform'] == 3

  hosts.restore(1)
  _wait_until(lambda: not isinstance(
      agent.call('shard_info')[hosts.addresses[1]], str), 'shard 1 answers')
  assert agent.call('shard_info')[hosts.addresses[1]]['uniform'] == 2


@pytest.mark.skipif(_sharded_client_missing(),
                    reason='needs reverb.Client over a list of addresses')
def test_sharded_client_over_hosts_survives_a_cut_link_and_the_shard_rejoins(
    hosts):
  agent = hosts.agent()
  agent.call('connect')
  num_writers = 2 * NUM_SHARDS

  def confirmed():
    return agent.call('progress')['confirmed']

  def no_writer_errors():
    errors = agent.call('progress')['errors']
    assert not errors, errors
    return True

  # Every writer confirms items, and every shard gets some.
  agent.call('start_writers', count=num_writers)
  _wait_until(lambda: min(confirmed()) >= 60, 'writers confirm items')
  _wait_until(lambda: all(
      not isinstance(info, str) and info['ledger'] > 0
      for info in agent.call('shard_info').values()), 'every shard has items')
  before_cut = agent.call('sample', n=600, fresh=False)

  # Shard 1's host is cut off: every writer goes on confirming (those on
  # shard 1 moved to the others), samplers go on sampling, and a client
  # made now samples only the shards it reaches.
  hosts.cut(1)
  at_cut = confirmed()
  _wait_until(lambda: no_writer_errors() and all(
      now >= then + 100 for now, then in zip(confirmed(), at_cut)),
              'every writer confirms items while shard 1 is cut off')
  while_cut = agent.call('sample', n=600, fresh=False)
  fresh_while_cut = agent.call('sample', n=600, fresh=True)
  merged = agent.call('server_info', timeout=10)  # The shards that answer.
  assert set(merged) == {'uniform', 'ledger'}

  # The link is back: shard 1 rejoins.
  hosts.restore(1)
  _wait_until(lambda: not isinstance(
      agent.call('shard_info')[hosts.addresses[1]], str), 'shard 1 answers')
  final = agent.call('stop_writers')
  assert not final['errors'], final['errors']
  written = {n * 10**7 + i for n in range(num_writers)
             for i in range(final['confirmed'][n])}

  # Nothing lost, nothing stored twice: once the rejoin deletes have run,
  # the shards hold every confirmed id exactly once.
  def sizes_add_up():
    info = agent.call('shard_info')
    return all(not isinstance(i, str) for i in info.values()) and sum(
        i['ledger'] for i in info.values()) == len(written) and sum(
            i['uniform'] for i in info.values()) == len(written)
  _wait_until(sizes_add_up, 'the shards hold each written item once')
  held = agent.call('drain')
  all_held = [i for ids in held.values() for i in ids]
  assert len(all_held) == len(set(all_held))
  assert set(all_held) == written
  shard_of = {i: k for k, address in enumerate(hosts.addresses)
              for i in held[address]}

  assert {shard_of[i] for i in before_cut} == set(range(NUM_SHARDS))
  assert set(while_cut) <= written
  assert 1 not in {shard_of[i] for i in fresh_while_cut}
  assert {shard_of[i] for i in fresh_while_cut} == {0, 2}
  # The client made before the cut samples shard 1 again.
  _wait_until(lambda: 1 in {shard_of[i] for i in agent.call(
      'sample', n=300, fresh=False)}, 'samples from shard 1 again')
