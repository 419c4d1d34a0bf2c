"""Client throughput over gRPC: `Client.insert` and `Client.sample` items/s.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14; it uses only
their shared public API (Server, Table, selectors, rate_limiters,
Client.insert, Client.sample), so the same command measures both:

  .venv/bin/python bench/client_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python bench/client_bench.py [--quick] [--json OUT]

The server runs in a child process (this script with --serve, same
interpreter), so client and server do not share a GIL or an in-process fast
path; with --same-process it runs in this process instead. Workloads, for a
small payload (float32[8], float32 and int64 scalars) and an 84x84x4 uint8
frame:
  insert        `client.insert(item, {table: 1.0})` in a loop;
  sample bulk   one `client.sample(table, num_samples=N)` generator, consumed;
  sample single `client.sample(table, num_samples=1)` called over and over.
Every sampled item is checked afterwards (columns, dtypes, shapes and the
contents, which encode the insert's sequence number), so a build that returns
wrong data fails instead of scoring. The command line, the child process and
the report come from harness.py.
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
_FRAME_BASE = (np.arange(np.prod(_FRAME_SHAPE), dtype=np.int64) % 251).astype(
    np.uint8).reshape(_FRAME_SHAPE)
_SMALL_OFFSETS = np.arange(8, dtype=np.float32) * np.float32(0.25)
# Fifo removal bounds server memory (frames are 28 KB each).
_TABLE_SIZES = {'small': 1_000_000, 'frame': 20_000}


def small_item(seq):
  return [_SMALL_OFFSETS + np.float32(seq), np.float32(seq % 1000 / 2),
          np.int64(seq)]


def frame_item(seq):
  return _FRAME_BASE + np.uint8(seq % 256)


def _column(data, index, dtype, shape):
  harness.check(isinstance(data, (list, tuple)),
                f'data is a {type(data).__name__}')
  col = np.asarray(data[index])
  harness.check(col.dtype == dtype,
                f'column {index}: dtype {col.dtype} != {np.dtype(dtype)}')
  harness.check(col.shape == (1,) + shape,
                f'column {index}: shape {col.shape} != {(1,) + shape}')
  return col[0]


def check_small(sample, num_inserted):
  harness.check(len(sample.data) == 3,
                f'{len(sample.data)} columns, expected 3')
  seq = int(_column(sample.data, 2, np.int64, ()))
  harness.check(0 <= seq < num_inserted,
                f'sequence number {seq} never inserted')
  want = small_item(seq)
  harness.check(
      np.array_equal(_column(sample.data, 0, np.float32, (8,)), want[0]),
      f'item {seq}: vector differs')
  harness.check(_column(sample.data, 1, np.float32, ()) == want[1],
                f'item {seq}: scalar differs')


def check_frame(sample, num_inserted):
  del num_inserted  # A frame only tells its sequence number modulo 256.
  harness.check(len(sample.data) == 1,
                f'{len(sample.data)} columns, expected 1')
  frame = _column(sample.data, 0, np.uint8, _FRAME_SHAPE)
  shift = frame - _FRAME_BASE  # uint8: wraps modulo 256.
  harness.check(np.all(shift == shift.flat[0]), 'frame contents corrupted')


PAYLOADS = {
    # name: (make item, check sample, bytes per item)
    'small': (small_item, check_small, 8 * 4 + 4 + 8),
    'frame': (frame_item, check_frame, int(np.prod(_FRAME_SHAPE))),
}


def make_tables():
  return [harness.fifo_table(name, max_size)
          for name, max_size in _TABLE_SIZES.items()]


def bench_insert(client, table, make_item, first_seq, seconds, max_items):
  """Inserts until `seconds` pass or `max_items` are in; returns the count
  and the time taken. Items are made beforehand; past 1024 they repeat."""
  items = [make_item(first_seq + i) for i in range(min(max_items, 1024))]
  count = 0
  start = time.perf_counter()
  deadline = start + seconds
  while count < max_items:
    client.insert(items[count % len(items)], priorities={table: 1.0})
    count += 1
    if count % 16 == 0 and time.perf_counter() >= deadline:
      break
  return count, time.perf_counter() - start


def bench_sample_single(client, table, seconds, check):
  """Calls `sample(table, num_samples=1)` until `seconds` pass; like
  `harness.sample_bulk` otherwise."""
  count = 0
  elapsed = 0.0
  deadline = time.perf_counter() + seconds
  while count == 0 or time.perf_counter() < deadline:
    start = time.perf_counter()
    samples = list(client.sample(table, num_samples=1, emit_timesteps=False))
    elapsed += time.perf_counter() - start
    harness.check(len(samples) == 1,
                  f'sample(num_samples=1) yielded {len(samples)} samples')
    check(samples[0])
    count += 1
  return count, elapsed


def run(args):
  seconds = 0.5 if args.quick else 2.0
  bulk_n = 500 if args.quick else 2000
  results = []
  with harness.server(args, make_tables) as server:
    client = reverb.Client(f'localhost:{server.port}')
    for name, (make_item, check, item_bytes) in PAYLOADS.items():
      # Warm-up: connection, writer and sampler set-up, first allocations.
      inserted, _ = bench_insert(client, name, make_item, 0, 60.0, 50)
      list(client.sample(name, num_samples=10, emit_timesteps=False))

      count, elapsed = bench_insert(client, name, make_item, inserted,
                                    seconds, 200_000)
      inserted += min(count, 1024)  # Items beyond 1024 repeat earlier ones.
      results.append((name, 'insert', count, elapsed, item_bytes))

      check_inserted = lambda sample, n=inserted, c=check: c(sample, n)
      count, elapsed, _ = harness.sample_bulk(client, name, bulk_n, seconds,
                                              check_inserted)
      results.append((name, f'sample bulk (N={bulk_n})', count, elapsed,
                      item_bytes))
      count, elapsed = bench_sample_single(client, name, seconds,
                                           check_inserted)
      results.append((name, 'sample single', count, elapsed, item_bytes))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s, N=500)', run, make_tables)
