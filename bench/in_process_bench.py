"""A server and its client in one process (Acme's single-process shape).

  .venv/bin/python bench/in_process_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/in_process_bench.py [--quick] [--json OUT]

`reverb.Server(tables)` and `reverb.Client(f'localhost:{port}')` side by
side, as `acme/jax/experiments/run_experiment.py` makes them: dm-reverb and
ours both hand the client the server's tables (InitializeConnection), so
nothing crosses a socket. Payloads, one step an item:
  small  {'action': int64, 'obs': float32[4]}, 24 bytes;
  frame  {'frame': uint8[84, 84, 4]}, 28 KB;
  1MB    {'x': int32[262144]}, 1 MiB.
Workloads (items/s):
  insert             a TrajectoryWriter (one chunk a step) appends steps and
                     makes an item of each, every 16 items waiting until at
                     most 16 are unconfirmed (as Acme's adders), flushing at
                     the end (timed);
  sample bulk        `client.sample(table, num_samples=N)` generators;
  TrajectoryDataset  (frames; needs TensorFlow) batches of 32 from
                     `TrajectoryDataset(..., max_in_flight_samples_per_worker
                     =100)`, as numpy;
  memcpy             1 MiB numpy copies from 200 arrays in turn (as many
                     as the 1MB table holds: the source is rarely in the
                     CPU's caches, as a sampled item's), what a 1 MB path
                     can approach; `memcpy, cached` from one array.
Sampled items are checked (shape, dtype, contents that encode the step's
number) outside the timed part. --same-process is the only mode here.
"""

import os
import sys
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_FRAME_SHAPE = (84, 84, 4)
_MB_ELEMENTS = 1 << 18  # int32: 1 MiB.
_MB_BASE = np.arange(_MB_ELEMENTS, dtype=np.int32)
_BATCH = 32


def small_step(i):
  return {'action': np.int64(i), 'obs': np.full([4], i, np.float32)}


def frame_step(i):
  return {'frame': np.full(_FRAME_SHAPE, i % 256, np.uint8)}


def mb_step(i):
  return {'x': _MB_BASE + np.int32(i)}


def check_small(data):
  obs, action = np.asarray(data[1]), np.asarray(data[0])
  harness.check(obs.shape == (4,), f'obs {obs.shape}')
  harness.check(np.all(obs == action), 'obs does not match action')


def check_frame(data):
  frame = np.asarray(data[0])
  harness.check(frame.shape == _FRAME_SHAPE and frame.dtype == np.uint8,
                f'frame {frame.shape} {frame.dtype}')
  harness.check(frame[0, 0, 0] == frame[-1, -1, -1], 'frame corrupted')


def check_mb(data):
  x = np.asarray(data[0])
  harness.check(x.shape == (_MB_ELEMENTS,) and x.dtype == np.int32,
                f'x {x.shape} {x.dtype}')
  shift = x[::257] - _MB_BASE[::257]
  harness.check(np.all(shift == shift[0]), 'item contents corrupted')


PAYLOADS = {  # name: (make step, check sample data, bytes, table size, N)
    'small': (small_step, check_small, 24, 100_000, 2000),
    'frame': (frame_step, check_frame, int(np.prod(_FRAME_SHAPE)), 10_000,
              1000),
    '1MB': (mb_step, check_mb, 4 * _MB_ELEMENTS, 200, 50),
}


def make_tables():
  return [harness.fifo_table(name, size)
          for name, (_, _, _, size, _) in PAYLOADS.items()]


def bench_insert(client, table, make_step, seconds):
  """Steps written (one item each) until `seconds` pass, and the time
  taken including the final flush. Steps are made beforehand."""
  steps = [make_step(i) for i in range(64)]
  count = 0
  start = time.perf_counter()
  deadline = start + seconds
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    while True:
      writer.append(steps[count % len(steps)])
      writer.create_item(table, 1.0, {
          key: writer.history[key][-1] for key in steps[0]})
      count += 1
      if count % 16 == 0:
        # As Acme's adders: at most a few items in flight.
        writer.flush(block_until_num_items=16, timeout_ms=600_000)
        if time.perf_counter() >= deadline:
          break
    writer.flush(timeout_ms=600_000)
  return count, time.perf_counter() - start


def bench_dataset(address, seconds):
  """Frames from a TrajectoryDataset, batches of 32 (None without TF)."""
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  dataset = reverb.TrajectoryDataset(
      address, 'frame', dtypes={'frame': tf.uint8},
      shapes={'frame': tf.TensorShape(_FRAME_SHAPE)},
      max_in_flight_samples_per_worker=100).batch(
          _BATCH, drop_remainder=True).prefetch(4)
  iterator = iter(dataset)
  next(iterator)  # Warm-up.
  count, elapsed = 0, 0.0
  while elapsed < seconds:
    start = time.perf_counter()
    batch = next(iterator)
    elapsed += time.perf_counter() - start
    frames = batch.data['frame'].numpy()
    harness.check(frames.shape == (_BATCH,) + _FRAME_SHAPE, 'frame batch')
    harness.check(np.array_equal(frames[:, 0, 0, 0], frames[:, -1, -1, -1]),
                  'frame corrupted')
    count += _BATCH
  return count, elapsed


def bench_memcpy(count, sources):
  """Seconds for `count` 1 MiB copies, from `sources` arrays in turn."""
  arrays = [mb_step(i)['x'] for i in range(sources)]
  target = np.empty_like(_MB_BASE)
  start = time.perf_counter()
  for i in range(count):
    np.copyto(target, arrays[i % sources])
  return time.perf_counter() - start


def run(args):
  seconds = 0.5 if args.quick else 2.0
  results = []
  with harness.InProcessServer(make_tables()) as server:
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    for name, (make_step, check, item_bytes, _, bulk_n) in PAYLOADS.items():
      bench_insert(client, name, make_step, 0.05)  # Warm-up.
      count, elapsed = bench_insert(client, name, make_step, seconds)
      results.append((name, 'insert', count, elapsed, item_bytes))
      count, elapsed, _ = harness.sample_bulk(
          client, name, bulk_n, seconds, lambda s, c=check: c(s.data))
      results.append((name, f'sample bulk (N={bulk_n})', count, elapsed,
                      item_bytes))
    timed = bench_dataset(address, seconds)
    if timed is not None:
      results.append(('frame', 'TrajectoryDataset', *timed,
                      int(np.prod(_FRAME_SHAPE))))
  blocks = 500 if args.quick else 2000
  results.append(('1MB', 'memcpy', blocks,
                  bench_memcpy(blocks, PAYLOADS['1MB'][3]), 4 * _MB_ELEMENTS))
  results.append(('1MB', 'memcpy, cached', blocks, bench_memcpy(blocks, 1),
                  4 * _MB_ELEMENTS))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s instead of 2 s)', run,
               make_tables)
