"""Sampling large items: bytes per second and page faults per batch.

  .venv/bin/python bench/batch_bench.py [--quick] [--json OUT] [--same-process]
  .venv-dmreverb/bin/python -I bench/batch_bench.py [--quick] [--json OUT]

The server runs in a child process (as a learner's replay server would),
with one table per payload, each item one step of one column:
  noise1MB  uint8[1 MiB] of random bytes (snappy cannot shrink them);
  noise28K  uint8[84, 84, 4] of random bytes;
  runs1MB   int32[262144], runs of 64 equal values offset by the step
            (snappy shrinks it about 10x).
64 items per table, sampled uniformly. Workloads (items/s):
  sample bulk       `client.sample(table, N, emit_timesteps=False)`;
  batches of 32     (ours only: dm-reverb 0.14 has no numpy batches but
                    through TensorFlow, see dataset_bench)
                    `ReplayIterator(batch_size=32)`, the batches stacked in
                    C++.
Every row also reports the client's minor page faults per item
(getrusage), which a fresh buffer per batch or per sample makes grow with
the item's size (4 KiB pages, or 2 MiB with huge pages), and the CPU time
of the client's process per item (all its threads; with --same-process
the server's too), which a loaded machine disturbs less than items/s. Sampled items are
checked (an item's first 8 bytes hold its step, the rest follow from it).
"""

import os
import resource
import sys
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_ITEMS = 64
_BATCH = 32


def _noise(step, size):
  data = np.random.default_rng(step).integers(0, 256, size, np.uint8)
  data[:8] = np.frombuffer(np.int64(step).tobytes(), np.uint8)
  return data


def _runs(step):
  return np.arange(1 << 18, dtype=np.int32) // 64 + np.int32(step)


# name: (make(step), step of a sampled item's data, bytes)
PAYLOADS = {
    'noise1MB': (lambda t: _noise(t, 1 << 20),
                 lambda d: int(np.frombuffer(d[:8].tobytes(), np.int64)[0]),
                 1 << 20),
    'noise28K': (lambda t: _noise(t, 84 * 84 * 4).reshape(84, 84, 4),
                 lambda d: int(np.frombuffer(d.reshape(-1)[:8].tobytes(),
                                             np.int64)[0]),
                 84 * 84 * 4),
    'runs1MB': (_runs, lambda d: int(d[0]), 1 << 20),
}


def make_tables():
  return [reverb.Table(name, reverb.selectors.Uniform(),
                       reverb.selectors.Fifo(), max_size=_ITEMS,
                       rate_limiter=reverb.rate_limiters.MinSize(1))
          for name in PAYLOADS]


def _faults():
  return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _check(name, data):
  make, step_of, _ = PAYLOADS[name]
  data = np.asarray(data)
  harness.check(np.array_equal(data, make(step_of(data))),
                f'{name}: an item is not what was written')


def bench_bulk(client, name, n, seconds):
  count, elapsed, cpu, faults = 0, 0.0, 0.0, 0
  last = None
  while elapsed < seconds:
    f0, c0, t0 = _faults(), time.process_time(), time.perf_counter()
    for sample in client.sample(name, num_samples=n, emit_timesteps=False):
      last = sample.data[0]
    elapsed += time.perf_counter() - t0
    cpu += time.process_time() - c0
    faults += _faults() - f0
    count += n
    _check(name, last)
  return count, elapsed, cpu, faults


def bench_batches(address, name, seconds):
  count, elapsed, cpu, faults = 0, 0.0, 0.0, 0
  with reverb.ReplayIterator(address, name, batch_size=_BATCH,
                             unpack_as_table_signature=False) as iterator:
    for _ in range(3):  # Warm-up: streams, first buffers.
      next(iterator)
    while elapsed < seconds:
      f0, c0, t0 = _faults(), time.process_time(), time.perf_counter()
      batch = next(iterator)
      elapsed += time.perf_counter() - t0
      cpu += time.process_time() - c0
      faults += _faults() - f0
      count += _BATCH
      _check(name, batch.data[0][(count // _BATCH) % _BATCH])
      del batch
  return count, elapsed, cpu, faults


def _figures(count, cpu, faults):
  return {'faults': {'per item': faults / count},
          'cpu_us_per_item': {'client': cpu / count * 1e6}}


def run(args):
  seconds = 0.5 if args.quick else 2.0
  bulk_n = 32 if args.quick else 64
  ours = hasattr(reverb, 'ReplayIterator')
  results = []
  with harness.server(args, make_tables) as server:
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    for name, (make, _, item_bytes) in PAYLOADS.items():
      with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for t in range(_ITEMS):
          writer.append([make(t)])
          writer.create_item(name, 1.0, [writer.history[0][-1]])
      bench_bulk(client, name, 8, 0.0)  # Warm-up.
      count, elapsed, cpu, faults = bench_bulk(client, name, bulk_n, seconds)
      results.append((name, f'sample bulk (N={bulk_n})', count, elapsed,
                      item_bytes, _figures(count, cpu, faults)))
      if ours:
        count, elapsed, cpu, faults = bench_batches(address, name, seconds)
        results.append((name, f'batches of {_BATCH}', count, elapsed,
                        item_bytes, _figures(count, cpu, faults)))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s, N=32)', run, make_tables)
