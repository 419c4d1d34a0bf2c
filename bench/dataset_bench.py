"""Sampling throughput for learners: TrajectoryDataset and ReplayIterator.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14 (both with
TensorFlow), so the same command measures both:

  .venv/bin/python bench/dataset_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/dataset_bench.py [--quick] [--json OUT]

The server runs in a child process (this script with --serve; in this
process with --same-process). Tables hold 2,000 items of one step each,
written once with a TrajectoryWriter:
  small  {'action': int64, 'obs': float32[4]}, 24 bytes;
  frame  {'frame': uint8[84, 84, 4]}, 28 KB.
Workloads (samples/s, batches of 32, timed from the first batch on):
  TrajectoryDataset  `TrajectoryDataset.from_table_signature(address, table,
      max_in_flight_samples_per_worker=100).batch(32).prefetch(4)`;
  ReplayIterator     `reverb.ReplayIterator(address, table, batch_size=32)`
      (ours only: dm-reverb has no framework-free iterator; the row is then
      not run);
  loop alone         the same loop over `Dataset.from_tensors(batch).repeat()
      .prefetch(4)`, one batch of the table repeated: what TensorFlow and
      the loop cost without Reverb, the most a TrajectoryDataset can reach;
  ..., tf.function   both again, with the batches taken inside a
      tf.function (10 per call, checked there), as learners that pass the
      iterator to their training step do.
Every batch is checked (shapes, dtypes, and contents that encode the item's
number), outside the timed part, so a broken build fails instead of scoring.
"""

import os
import sys
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_NUM_ITEMS = 2000
_BATCH = 32
_FRAME_SHAPE = (84, 84, 4)


def small_step(i):
  return {'action': np.int64(i), 'obs': np.full([4], i, np.float32)}


def frame_step(i):
  return {'frame': np.full(_FRAME_SHAPE, i % 256, np.uint8),
          'number': np.int64(i)}


def check_small(data):
  harness.check(data['obs'].shape == (_BATCH, 4), f'obs {data["obs"].shape}')
  harness.check(np.array_equal(data['obs'][:, 0], data['action']),
                'obs does not match action')


def check_frame(data):
  frames = data['frame']
  harness.check(frames.shape == (_BATCH,) + _FRAME_SHAPE and
                frames.dtype == np.uint8, f'frame {frames.shape}')
  harness.check(np.array_equal(frames[:, 0, 0, 0], data['number'] % 256) and
                np.array_equal(frames[:, -1, -1, -1], data['number'] % 256),
                'frame does not match its number')


PAYLOADS = {  # name: (make step, check batch, bytes per sample)
    'small': (small_step, check_small, 8 + 16),
    'frame': (frame_step, check_frame, int(np.prod(_FRAME_SHAPE)) + 8),
}


def make_tables():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  signatures = {
      'small': {'action': tf.TensorSpec([], tf.int64),
                'obs': tf.TensorSpec([4], tf.float32)},
      'frame': {'frame': tf.TensorSpec(_FRAME_SHAPE, tf.uint8),
                'number': tf.TensorSpec([], tf.int64)},
  }
  return [reverb.Table(name=name, sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=_NUM_ITEMS,
                       rate_limiter=reverb.rate_limiters.MinSize(1),
                       signature=signatures[name]) for name in PAYLOADS]


def fill(client):
  for name, (make_step, _, _) in PAYLOADS.items():
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(_NUM_ITEMS):
        writer.append(make_step(i))
        writer.create_item(name, 1.0, {
            key: writer.history[key][-1] for key in make_step(0)})


def timed_batches(batches, seconds, check):
  """Takes batches until `seconds` of taking have passed (after one warm-up
  batch); returns (samples, seconds spent taking them)."""
  iterator = iter(batches)
  check(next(iterator))
  count, elapsed = 0, 0.0
  while elapsed < seconds:
    start = time.perf_counter()
    batch = next(iterator)
    elapsed += time.perf_counter() - start
    check(batch)
    count += _BATCH
  return count, elapsed


_GRAPH_BATCHES = 10  # Batches per tf.function call.


def graph_checks(tf):
  """payload: TF function of a batch's data, True if it is consistent."""
  return {
      'small': lambda d: tf.reduce_all(
          tf.equal(d['obs'][:, 0], tf.cast(d['action'], tf.float32))),
      'frame': lambda d: tf.reduce_all(tf.equal(
          tf.cast(d['frame'][:, 0, 0, 0], tf.int64), d['number'] % 256)),
  }


def timed_graph_batches(dataset, seconds, check_batch):
  """As timed_batches, with _GRAPH_BATCHES batches taken (and checked) per
  call of a tf.function."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  iterator = iter(dataset)

  @tf.function
  def take(iterator):
    ok = tf.constant(True)
    for _ in tf.range(_GRAPH_BATCHES):
      ok = tf.logical_and(ok, check_batch(next(iterator).data))
    return ok

  harness.check(bool(take(iterator)), 'batch does not match its contents')
  count, elapsed = 0, 0.0
  while elapsed < seconds:
    start = time.perf_counter()
    ok = take(iterator)
    elapsed += time.perf_counter() - start
    harness.check(bool(ok), 'batch does not match its contents')
    count += _BATCH * _GRAPH_BATCHES
  return count, elapsed


def as_numpy(dataset):
  """The data of every batch of `dataset`, as numpy arrays."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return (tf.nest.map_structure(lambda t: t.numpy(), b.data) for b in dataset)


def run(args):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  seconds = 0.5 if args.quick else 2.0
  results = []
  with harness.server(args, make_tables) as server:
    address = f'localhost:{server.port}'
    fill(reverb.Client(address))
    for name, (_, check, item_bytes) in PAYLOADS.items():
      dataset = reverb.TrajectoryDataset.from_table_signature(
          address, name, max_in_flight_samples_per_worker=100).batch(
              _BATCH, drop_remainder=True).prefetch(4)
      count, elapsed = timed_batches(as_numpy(dataset), seconds, check)
      results.append((name, 'TrajectoryDataset', count, elapsed, item_bytes))
      first = next(iter(dataset))
      alone = tf.data.Dataset.from_tensors(first).repeat().prefetch(4)
      count, elapsed = timed_batches(as_numpy(alone), seconds, check)
      results.append((name, 'loop alone', count, elapsed, item_bytes))
      graph_check = graph_checks(tf)[name]
      count, elapsed = timed_graph_batches(dataset, seconds, graph_check)
      results.append((name, 'TrajectoryDataset, tf.function', count, elapsed,
                      item_bytes))
      count, elapsed = timed_graph_batches(alone, seconds, graph_check)
      results.append((name, 'loop alone, tf.function', count, elapsed,
                      item_bytes))
      if hasattr(reverb, 'ReplayIterator'):
        with reverb.ReplayIterator(address, name, batch_size=_BATCH) as it:
          count, elapsed = timed_batches((b.data for b in it), seconds, check)
        results.append((name, 'ReplayIterator', count, elapsed, item_bytes))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s instead of 2 s)', run,
               make_tables)
