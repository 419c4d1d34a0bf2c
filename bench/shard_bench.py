"""Sharding: insert and sample throughput over 1, 2 and 4 servers, the CPU
per item on both ends, and the prioritized distribution's error.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14:

  .venv/bin/python bench/shard_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/shard_bench.py [--quick] [--json OUT]

For S = 1, 2 and 4 shards, S servers run in child processes of their own
(this script with --serve) and the same two client processes (--worker 0
and 1) drive them. One server is `localhost:P` for both packages. Over
several, a package whose Client takes a list of addresses (ours) gets the
list, `reverb.Client([address, ...])`; dm-reverb has no such client, and its
only option is gRPC's round_robin over the same servers,
`reverb.Client('ipv4:127.0.0.1:P1,127.0.0.1:P2,...')`, which puts each call
(a writer's stream, a `sample` call's stream, a ServerInfo) on the next
server. Workloads, per S:
  insert, S shards   each client process: `trajectory_writer(
      num_keep_alive_refs=1)`, per step `append({'id': int64})` and
      `create_item` into a Uniform table, `end_episode()` every 100 steps,
      for 2 s, then `flush()`; items/s are both processes' items over the
      wall time from the first start to the last flush. Each writer first
      writes 100 untimed steps (connection and stream set-up);
  sample, S shards   each client process: `client.sample(table, 2000)`
      consumed over and over for 2 s (after 10 untimed samples) from a
      Prioritized table (exponent 0.8) whose 60 items were written to the
      servers directly beforehand, server k of S holding k + 1 parts of
      them (unequal sizes and priority masses), item i with priority
      1 + (i % 8) / 2;
  prioritized error, S shards   this process samples the same table through
      the same kind of client, in calls of 100 samples (20,000 samples;
      2,000 with --quick): `tv_distance` holds `sampled`, the total variation
      distance of the sampled frequencies from p^0.8 / sum over all items,
      and `exact sampler`, that of as many draws from that distribution
      (numpy): the noise floor of the sample count.
The throughput rows carry `cpu_us_per_item`: `client`, the client
processes' CPU (time.process_time, all threads) and `server`, the servers'
(utime + stime of /proc/PID/stat), each summed over its processes over the
timed window, in microseconds per item: on two cores every process competes
for them, and these are what scale on bigger machines. Every sampled item
is checked (its id was written, its priority is its own), and after the
insert workload the servers must hold every item written, so a build that
loses or garbles data fails instead of scoring. --quick: 0.5 s workloads.
The command line, the child processes and the report come from harness.py.
"""

import contextlib
import json
import os
import sys
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

SHARD_COUNTS = (1, 2, 4)
_NUM_CLIENTS = 2
_INSERT_TABLE = 'uniform'
_SAMPLE_TABLE = 'prioritized'
_EXPONENT = 0.8
_NUM_PRIORITIZED = 60  # Splits into 1 + 2 + ... + S parts for S of 1, 2, 4.
_EPISODE_STEPS = 100
_WARMUP_STEPS = 100
_BULK = 2000
_ERROR_CALL = 100
_ITEM_BYTES = 8
# Ids of the insert workload: client process n writes n * _ID_CLIENT + step.
_ID_CLIENT = 10**12


def make_tables():
  return [
      reverb.Table(name=_INSERT_TABLE, sampler=reverb.selectors.Uniform(),
                   remover=reverb.selectors.Fifo(), max_size=10**7,
                   rate_limiter=reverb.rate_limiters.MinSize(1)),
      reverb.Table(name=_SAMPLE_TABLE,
                   sampler=reverb.selectors.Prioritized(_EXPONENT),
                   remover=reverb.selectors.Fifo(), max_size=10**6,
                   rate_limiter=reverb.rate_limiters.MinSize(1)),
  ]


def priority(item_id):
  return 1.0 + (item_id % 8) * 0.5  # Exact in float32 and float64.


def placement(num_shards):
  """The server of each prioritized item: server k holds k + 1 parts."""
  parts = num_shards * (num_shards + 1) // 2
  bounds = np.cumsum([(k + 1) * _NUM_PRIORITIZED // parts
                      for k in range(num_shards)])
  return [int(np.searchsorted(bounds, i, side='right'))
          for i in range(_NUM_PRIORITIZED)]


def sharded_supported():
  """Whether this package's Client takes a list of addresses (ours)."""
  try:
    reverb.Client(['localhost:1', 'localhost:2'])
  except TypeError:
    return False
  return True


def client_address(ports, sharded):
  """What a Client over the servers on `ports` is made from."""
  if len(ports) == 1:
    return f'localhost:{ports[0]}'
  if sharded:
    return [f'127.0.0.1:{port}' for port in ports]
  return 'ipv4:' + ','.join(f'127.0.0.1:{port}' for port in ports)


def sample_id(sample):
  return int(np.asarray(sample.data[0]).reshape(-1)[0])


def check_prioritized(sample):
  """The sample's id (BrokenSample unless it is a prioritized item with its
  own priority)."""
  item_id = sample_id(sample)
  harness.check(0 <= item_id < _NUM_PRIORITIZED,
                f'id {item_id} never written')
  got = float(np.asarray(sample.info.priority).reshape(-1)[0])
  harness.check(got == priority(item_id),
                f'item {item_id}: priority {got}, expected '
                f'{priority(item_id)}')
  return item_id


def insert(client, number, seconds):
  """--worker job: a TrajectoryWriter's warm-up, READY, GO, then timed
  steps; returns (items written in all, timed items, start, end, CPU)."""
  step = {'id': np.int64(0)}
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  written = 0

  def write_step():
    nonlocal written
    step['id'] = np.int64(number * _ID_CLIENT + written)
    writer.append(step)
    writer.create_item(_INSERT_TABLE, 1.0, {'id': writer.history['id'][-1]})
    written += 1
    if written % _EPISODE_STEPS == 0:
      writer.end_episode()

  while written < _WARMUP_STEPS:
    write_step()
  print('READY', flush=True)
  sys.stdin.readline()  # GO
  cpu, start = time.process_time(), time.monotonic()
  deadline = start + seconds
  while time.monotonic() < deadline:
    write_step()
  writer.flush()
  end, cpu = time.monotonic(), time.process_time() - cpu
  writer.end_episode()
  writer.close()
  return written, written - _WARMUP_STEPS, start, end, cpu


def sample(client, seconds):
  """--worker job: 10 untimed samples, READY, GO, then bulk samples; returns
  (0, timed items, start, end, CPU)."""
  for s in client.sample(_SAMPLE_TABLE, num_samples=10, emit_timesteps=False):
    check_prioritized(s)
  print('READY', flush=True)
  sys.stdin.readline()  # GO
  cpu, start = time.process_time(), time.monotonic()
  count, _, _ = harness.sample_bulk(client, _SAMPLE_TABLE, _BULK, seconds,
                                    check_prioritized)
  end, cpu = time.monotonic(), time.process_time() - cpu
  return 0, count, start, end, cpu


def worker(number):
  """--worker N: for each job line on stdin, a Client over its servers
  (made once per set of servers), the job, then DONE {json}."""
  clients = {}
  for line in iter(sys.stdin.readline, ''):
    job = json.loads(line)
    address = job['address']
    key = json.dumps(address)
    if key not in clients:
      clients[key] = reverb.Client(address)
    if job['op'] == 'insert':
      result = insert(clients[key], number, job['seconds'])
    else:
      result = sample(clients[key], job['seconds'])
    print('DONE ' + json.dumps(dict(zip(
        ('written', 'items', 'start', 'end', 'cpu'), result))), flush=True)


def run_job(workers, servers, job):
  """Runs `job` on every worker, started at once; returns (items written
  in all, timed items, wall seconds, client CPU, server CPU)."""
  for child in workers:
    child.send(json.dumps(job))
  for child in workers:
    child.read('READY')
  before = harness.children_cpu(servers)
  for child in workers:
    child.send('GO')
  done = [json.loads(child.read('DONE ', timeout=job['seconds'] + 120))
          for child in workers]
  used = harness.children_cpu(servers) - before
  wall = max(d['end'] for d in done) - min(d['start'] for d in done)
  return (sum(d['written'] for d in done), sum(d['items'] for d in done),
          wall, sum(d['cpu'] for d in done), used)


def cpu_us(items, client, server):
  return {'cpu_us_per_item': {'client': round(client / items * 1e6, 3),
                              'server': round(server / items * 1e6, 3)}}


def fill_prioritized(ports):
  """Writes the prioritized items to their servers, each alone."""
  for shard, port in enumerate(ports):
    client = reverb.Client(f'localhost:{port}')
    ids = [i for i, s in enumerate(placement(len(ports))) if s == shard]
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for item_id in ids:
        writer.append({'id': np.int64(item_id)})
        writer.create_item(_SAMPLE_TABLE, priority(item_id),
                           {'id': writer.history['id'][-1]})
      writer.end_episode()


def check_inserted(ports, written):
  """BrokenSample unless the servers hold the `written` items."""
  held = sum(reverb.Client(f'localhost:{port}').server_info()[
      _INSERT_TABLE].current_size for port in ports)
  harness.check(held == written,
                f'the servers hold {held} items, {written} written')


def distribution_error(address, num_samples, rng):
  """(TV distance of `num_samples` samples through a Client at `address`
  from p^a / sum, and that of as many exact draws)."""
  weights = np.array([priority(i) for i in range(_NUM_PRIORITIZED)])**_EXPONENT
  exact = weights / weights.sum()
  client = reverb.Client(address)
  counts = np.zeros(_NUM_PRIORITIZED)
  while counts.sum() < num_samples:
    for s in client.sample(_SAMPLE_TABLE, num_samples=_ERROR_CALL,
                           emit_timesteps=False):
      counts[check_prioritized(s)] += 1
  drawn = np.bincount(rng.choice(_NUM_PRIORITIZED, int(counts.sum()), p=exact),
                      minlength=_NUM_PRIORITIZED)
  tv = lambda c: float(np.abs(c / c.sum() - exact).sum() / 2)
  return tv(counts), tv(drawn)


def run(args):
  seconds = 0.5 if args.quick else 2.0
  num_samples = 2_000 if args.quick else 20_000
  sharded = sharded_supported()
  print('clients over several servers: '
        + ('reverb.Client([...])' if sharded else "round_robin 'ipv4:...'"),
        flush=True)
  rng = np.random.default_rng(0)
  results = []
  with contextlib.ExitStack() as stack:
    workers = harness.start_workers(stack, _NUM_CLIENTS, 'client')
    for num_shards in SHARD_COUNTS:
      with contextlib.ExitStack() as shards:
        # Started together: dm-reverb's take seconds each to import.
        servers = [shards.enter_context(harness.ChildProcess(
            ['--serve'], f'server {k}')) for k in range(num_shards)]
        ports = [int(server.read('PORT ')) for server in servers]
        address = client_address(ports, sharded)
        label = f'{num_shards} shard' + ('s' if num_shards > 1 else '')

        written, items, wall, client, server = run_job(
            workers, servers,
            {'op': 'insert', 'address': address, 'seconds': seconds})
        check_inserted(ports, written)
        results.append(('small', f'insert, {label}', items, wall, _ITEM_BYTES,
                        cpu_us(items, client, server)))

        fill_prioritized(ports)
        _, items, wall, client, server = run_job(
            workers, servers,
            {'op': 'sample', 'address': address, 'seconds': seconds})
        results.append(('small', f'sample, {label}', items, wall, _ITEM_BYTES,
                        cpu_us(items, client, server)))

        sampled, exact = distribution_error(address, num_samples, rng)
        results.append(('small', f'prioritized error, {label}', None, None, 0,
                        {'tv_distance': {'sampled': round(sampled, 4),
                                         'exact sampler': round(exact, 4)}}))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s, 2,000 samples)', run,
               make_tables, worker)
