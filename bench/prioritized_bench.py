"""A Prioritized table of 10^6 items over gRPC: fill, sample, mutate_priorities.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14; it uses only
their shared public API (Client.trajectory_writer, Client.writer,
Client.sample, Client.mutate_priorities, Client.server_info), so the same
command measures both:

  .venv/bin/python bench/prioritized_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/prioritized_bench.py [--quick] [--json OUT]

The server runs in a child process (this script with --serve, same
interpreter; in this process with --same-process). One table:
`Prioritized(priority_exponent=0.8)`, Fifo removal, max_size 10^6,
MinSize(1). Items are one step {'obs': float32[4], 'seq': int64} (24 bytes)
whose priority, 1 + (seq % 64) / 8, follows from the data. Workloads, in this
order (--quick: 10^5 items, 0.5 s per sampling or mutating workload):
  fill, TrajectoryWriter  the first 90% of the items:
      `trajectory_writer(num_keep_alive_refs=2)`, per step `append(step)` and
      `create_item(table, priority, {k: history[k][-1]})`, `end_episode()`
      every 1,000 steps, `flush()` at the end, all timed;
  fill, legacy Writer     the other 10%: `writer(max_sequence_length=1,
      max_in_flight_items=1000)`, per step `append(step)` and
      `create_item(table, 1, priority)`, `flush()` at the end, all timed.
      Both are there because neither is the fastest in both packages: ours
      fills fastest with the TrajectoryWriter, dm-reverb with the legacy
      Writer (Client.insert, a round trip per item, is 5-10x slower in both);
  sample bulk (N=2000)    `client.sample(table, num_samples=2000)` consumed,
      for 2 s (the sampled keys feed the next workload);
  mutate_priorities       `client.mutate_priorities(table, updates)` with
      1,000 distinct sampled keys per call, for 2 s: updates/s; with our
      package also with `updates=(keys, priorities)`, numpy arrays (the same
      keys and priorities);
  sample single           `client.sample(table, num_samples=1)` called over
      and over for 2 s: items/s, and the p50 and p99 latency of one call.
Only the calls are timed. Afterwards the table must hold every item written
(size and completed inserts), and every sampled item is checked (columns,
dtypes, shapes, the contents, which encode `seq`, the table size, and the
priority: the one it was written with, or the last one mutate_priorities
gave its key); the single samples must include items whose priority was
mutated. So a build that loses, garbles or misprioritises fails instead of
scoring. The command line, the child process and the report come from
harness.py.
"""

import os
import sys
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_TABLE = 'prioritized'
_FULL_ITEMS = 1_000_000
_QUICK_ITEMS = 100_000
_POOL = 1000  # Steps are made beforehand; seq repeats modulo _POOL...
_LEGACY_TAG = 1000  # ...offset by this for the legacy Writer's steps.
_EPISODE_STEPS = 1000
_BULK = 2000
_MUTATE_BATCH = 1000
_OFFSETS = np.arange(4, dtype=np.float32) * np.float32(0.25)
_ITEM_BYTES = 4 * 4 + 8


def step(tag):
  return {'obs': _OFFSETS + np.float32(tag), 'seq': np.int64(tag)}


def priority(tag):
  return 1.0 + (tag % 64) * 0.125  # Exact in float32 and float64.


def make_tables():
  return [reverb.Table(name=_TABLE,
                       sampler=reverb.selectors.Prioritized(0.8),
                       remover=reverb.selectors.Fifo(),
                       max_size=_FULL_ITEMS,
                       rate_limiter=reverb.rate_limiters.MinSize(1))]


def fill_trajectory_writer(client, count):
  """`count` items through a TrajectoryWriter; returns the seconds taken."""
  pool = [step(tag) for tag in range(_POOL)]
  keys = sorted(pool[0])
  start = time.perf_counter()
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  for i in range(count):
    tag = i % _POOL
    writer.append(pool[tag])
    writer.create_item(_TABLE, priority(tag),
                       {key: writer.history[key][-1] for key in keys})
    if (i + 1) % _EPISODE_STEPS == 0:
      writer.end_episode()
  writer.flush()
  elapsed = time.perf_counter() - start
  writer.end_episode()
  writer.close()
  return elapsed


def fill_legacy_writer(client, count):
  """`count` items through a legacy Writer; returns the seconds taken."""
  pool = [step(_LEGACY_TAG + tag) for tag in range(_POOL)]
  start = time.perf_counter()
  writer = client.writer(max_sequence_length=1, max_in_flight_items=1000)
  for i in range(count):
    tag = i % _POOL
    writer.append(pool[tag])
    writer.create_item(_TABLE, 1, priority(_LEGACY_TAG + tag))
  writer.flush()
  elapsed = time.perf_counter() - start
  writer.close()
  return elapsed


class Checker:
  """Checks sampled items; knows the priorities mutate_priorities set."""

  def __init__(self, num_items):
    self.num_items = num_items
    self.mutated = {}  # key: priority last set.
    self.mutated_seen = 0  # Samples of an item whose priority was mutated.

  def __call__(self, sample):
    data = sample.data
    harness.check(isinstance(data, (list, tuple)) and len(data) == 2,
                  f'data is {type(data).__name__} of {len(data)}')
    obs, seq = np.asarray(data[0]), np.asarray(data[1])
    # A TrajectoryWriter item of history[k][-1] has no time dimension; a
    # legacy Writer item of one step has a time dimension of 1.
    harness.check(obs.dtype == np.float32 and obs.shape in ((4,), (1, 4)),
                  f'obs is {obs.dtype}{obs.shape}')
    harness.check(seq.dtype == np.int64 and seq.shape in ((), (1,)),
                  f'seq is {seq.dtype}{seq.shape}')
    tag = int(seq.reshape(()))
    harness.check(0 <= tag < _LEGACY_TAG + _POOL, f'seq {tag} never written')
    harness.check(np.array_equal(obs.reshape(4), step(tag)['obs']),
                  f'item {tag}: obs differs')
    info = sample.info
    key = int(np.asarray(info.key).reshape(-1)[0])
    got = float(np.asarray(info.priority).reshape(-1)[0])
    size = int(np.asarray(info.table_size).reshape(-1)[0])
    harness.check(size == self.num_items,
                  f'table size {size}, {self.num_items} written')
    want = self.mutated.get(key)
    if want is None:
      want = priority(tag)
    else:
      self.mutated_seen += 1
    harness.check(got == want, f'item {tag}: priority {got}, expected {want}')
    return key


def bench_mutate(client, keys, seconds, check, arrays=False):
  """mutate_priorities of _MUTATE_BATCH keys a call, until `seconds` pass
  (at least one call), as dicts or (with `arrays`) as a pair of numpy arrays
  (keys, priorities); every key's new priority is 50 or more, so it tells
  a mutated item from one that was not. Returns the updates and the seconds
  spent in the calls."""
  keys = sorted(keys)
  harness.check(len(keys) >= 2 * _MUTATE_BATCH,
                f'only {len(keys)} distinct keys sampled')
  halves = [keys[:_MUTATE_BATCH], keys[_MUTATE_BATCH:2 * _MUTATE_BATCH]]
  # Made beforehand: 2 x 25 batches, cycled through.
  batches = [{key: 50.0 + value for key in half}
             for value in range(25) for half in halves]
  sent = [(np.array(list(batch), np.uint64), np.array(list(batch.values())))
          if arrays else batch for batch in batches]
  count = 0
  elapsed = 0.0
  deadline = time.perf_counter() + seconds
  while count == 0 or time.perf_counter() < deadline:
    index = (count // _MUTATE_BATCH) % len(batches)
    batch = batches[index]
    start = time.perf_counter()
    client.mutate_priorities(_TABLE, updates=sent[index])
    elapsed += time.perf_counter() - start
    check.mutated.update(batch)
    count += len(batch)
  return count, elapsed


def bench_sample_single(client, seconds, check):
  """`sample(table, 1)` until `seconds` pass; returns the items, the seconds
  spent sampling and each call's duration."""
  durations = []
  deadline = time.perf_counter() + seconds
  while not durations or time.perf_counter() < deadline:
    start = time.perf_counter()
    samples = list(client.sample(_TABLE, num_samples=1, emit_timesteps=False))
    durations.append(time.perf_counter() - start)
    harness.check(len(samples) == 1,
                  f'sample(num_samples=1) yielded {len(samples)} samples')
    check(samples[0])
  return len(durations), sum(durations), durations


def run(args):
  num_items = _QUICK_ITEMS if args.quick else _FULL_ITEMS
  seconds = 0.5 if args.quick else 2.0
  by_trajectory_writer = num_items * 9 // 10
  by_legacy_writer = num_items - by_trajectory_writer
  results = []
  with harness.server(args, make_tables) as server:
    client = reverb.Client(f'localhost:{server.port}')
    elapsed = fill_trajectory_writer(client, by_trajectory_writer)
    results.append(('small', 'fill, TrajectoryWriter', by_trajectory_writer,
                    elapsed, _ITEM_BYTES))
    elapsed = fill_legacy_writer(client, by_legacy_writer)
    results.append(('small', 'fill, legacy Writer', by_legacy_writer,
                    elapsed, _ITEM_BYTES))
    info = client.server_info()[_TABLE]
    harness.check(info.current_size == num_items,
                  f'table holds {info.current_size} of {num_items} items')
    completed = info.rate_limiter_info.insert_stats.completed
    harness.check(completed == num_items,
                  f'{completed} inserts completed, {num_items} written')

    check = Checker(num_items)
    list(client.sample(_TABLE, num_samples=10, emit_timesteps=False))
    count, elapsed, keys = harness.sample_bulk(client, _TABLE, _BULK, seconds,
                                               check)
    keys = set(keys)
    results.append(('small', f'sample bulk (N={_BULK})', count, elapsed,
                    _ITEM_BYTES))
    while len(keys) < 2 * _MUTATE_BATCH:  # Untimed: keys to mutate.
      keys.update(check(sample) for sample in client.sample(
          _TABLE, num_samples=_BULK, emit_timesteps=False))
    count, elapsed = bench_mutate(client, keys, seconds, check)
    results.append(('small', f'mutate_priorities ({_MUTATE_BATCH:,}/call)',
                    count, elapsed, 0))
    if 'dm-reverb' not in harness.reverb_description():  # Ours only.
      count, elapsed = bench_mutate(client, keys, seconds, check, arrays=True)
      results.append(('small', f'mutate_priorities ({_MUTATE_BATCH:,}/call, '
                      'numpy arrays)', count, elapsed, 0))
    count, elapsed, durations = bench_sample_single(client, seconds, check)
    harness.check(check.mutated_seen > 0,
                  'no sampled item had its mutated priority')
    results.append(('small', 'sample single', count, elapsed, _ITEM_BYTES,
                    {'latency_ms': harness.latency_ms(durations)}))
  return results


if __name__ == '__main__':
  harness.main(__doc__, f'{_QUICK_ITEMS:,} items, 0.5 s workloads', run,
               make_tables)
