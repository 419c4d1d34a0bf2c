"""TFClient throughput: `TFClient.insert` and `TFClient.sample` as ops in a
tf.function loop.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14 (both with
TensorFlow), so the same command measures both:

  .venv/bin/python bench/tf_client_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/tf_client_bench.py [--quick] [--json OUT]

The server runs in a child process (this script with --serve; in this
process with --same-process). Its tables have signatures (every insert is
checked against them), uniform sampling and room for 1,000 items:
  small  {'action': int64, 'obs': float32[4]}, 24 bytes;
  frame  {'frame': uint8[84, 84, 4], 'number': int64}, 28 KB.
Workloads (items/s, timed from the second call on):
  insert, tf.function  a tf.function whose `tf.range` loop makes 10 steps
      from the loop counter and inserts each with `TFClient.insert` into the
      table (priority 1);
  sample, tf.function  a tf.function whose loop samples 10 items with
      `TFClient.sample` and checks each in the graph.
Every step encodes its number in all its fields; the sampled items are
checked (in the graph, and the inserted ones sampled and checked after the
insert workload), so a broken build fails instead of scoring.
"""

import os
import sys
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_MAX_SIZE = 1000
_OPS_PER_CALL = 10
_FRAME_SHAPE = (84, 84, 4)


def _tf():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf


def small_step(tf, i):
  return {'action': tf.cast(i, tf.int64),
          'obs': tf.fill([4], tf.cast(i, tf.float32))}


def frame_step(tf, i):
  return {'frame': tf.fill(_FRAME_SHAPE, tf.cast(i % 256, tf.uint8)),
          'number': tf.cast(i, tf.int64)}


def check_small(tf, data):
  return tf.reduce_all(tf.equal(data['obs'], tf.cast(data['action'],
                                                     tf.float32)))


def check_frame(tf, data):
  return tf.reduce_all(tf.equal(data['frame'],
                                tf.cast(data['number'] % 256, tf.uint8)))


PAYLOADS = {  # name: (make step, check step, bytes per item)
    'small': (small_step, check_small, 8 + 16),
    'frame': (frame_step, check_frame, int(np.prod(_FRAME_SHAPE)) + 8),
}


def _signature(tf, name):
  return {'small': {'action': tf.TensorSpec([], tf.int64),
                    'obs': tf.TensorSpec([4], tf.float32)},
          'frame': {'frame': tf.TensorSpec(_FRAME_SHAPE, tf.uint8),
                    'number': tf.TensorSpec([], tf.int64)}}[name]


def make_tables():
  tf = _tf()
  return [reverb.Table(name=name, sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=_MAX_SIZE,
                       rate_limiter=reverb.rate_limiters.MinSize(1),
                       signature=_signature(tf, name)) for name in PAYLOADS]


def timed_calls(function, seconds):
  """Calls `function` (after one warm-up call) until `seconds` of calls have
  passed; each call must return True. Returns (items, seconds)."""
  harness.check(bool(function()), 'a sampled item is inconsistent')
  count, elapsed = 0, 0.0
  while elapsed < seconds:
    start = time.perf_counter()
    ok = function()
    elapsed += time.perf_counter() - start
    harness.check(bool(ok), 'a sampled item is inconsistent')
    count += _OPS_PER_CALL
  return count, elapsed


def run(args):
  tf = _tf()
  seconds = 0.5 if args.quick else 2.0
  results = []
  with harness.server(args, make_tables) as server:
    client = reverb.TFClient(f'localhost:{server.port}')
    for name, (make_step, check_step, item_bytes) in PAYLOADS.items():
      dtypes = tf.nest.map_structure(lambda s: s.dtype, _signature(tf, name))
      tables = tf.constant([name])
      priorities = tf.constant([1.0], tf.float64)

      @tf.function
      def insert(make_step=make_step):
        for i in tf.range(_OPS_PER_CALL):
          client.insert(tf.nest.flatten(make_step(tf, i)), tables,
                        priorities)
        return tf.constant(True)

      @tf.function
      def sample(check_step=check_step, dtypes=dtypes, name=name):
        ok = tf.constant(True)
        for _ in tf.range(_OPS_PER_CALL):
          data = client.sample(name, dtypes).data
          ok = tf.logical_and(ok, check_step(tf, data))
        return ok

      count, elapsed = timed_calls(insert, seconds)
      results.append((name, 'insert, tf.function', count, elapsed,
                      item_bytes))
      size = reverb.Client(f'localhost:{server.port}').server_info()[
          name].current_size
      harness.check(size == min(_MAX_SIZE, count + _OPS_PER_CALL),
                    f'table {name} holds {size} items')
      count, elapsed = timed_calls(sample, seconds)
      results.append((name, 'sample, tf.function', count, elapsed,
                      item_bytes))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s instead of 2 s)', run,
               make_tables)
