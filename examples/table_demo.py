"""Main job until the gRPC server lands: actors and a learner on one table.

Actor threads write steps of 84x84x4 uint8 frames (as chunks) and insert
items into a prioritized table limited by SampleToInsertRatio; a learner
thread samples batches, checks the frames it got and updates priorities.
Throughput is printed once per second.

  .venv/bin/python examples/table_demo.py [--seconds 10] [--actors 2]
"""

import argparse
import threading
import time

import numpy as np

import reverb
from reverb import tf_protos
from reverb.cc import schema_pb2

FRAME_SHAPE = (84, 84, 4)


def make_step(key: int, episode: int, step: int):
  """An item of one step: a chunk holding a frame filled with `key % 251`."""
  frame = np.full((1,) + FRAME_SHAPE, key % 251, dtype=np.uint8)
  chunk = schema_pb2.ChunkData(chunk_key=key, data_tensors_len=1,
                               data_uncompressed_size=frame.nbytes)
  chunk.sequence_range.episode_id = episode
  chunk.sequence_range.start = chunk.sequence_range.end = step
  tensor = chunk.data.tensors.add(dtype=tf_protos.DT_UINT8,
                                  tensor_content=frame.tobytes())
  for size in frame.shape:
    tensor.tensor_shape.dim.add(size=size)
  item = schema_pb2.PrioritizedItem(key=key, table='replay', priority=1.0)
  item.flat_trajectory.columns.add(squeeze=True).chunk_slices.add(
      chunk_key=key, offset=0, length=1, index=0)
  return item.SerializeToString(), [chunk.SerializeToString()]


def actor(table, actor_id, stop, counts):
  key = actor_id << 48
  episode = actor_id << 32
  while not stop.is_set():
    episode += 1
    for step in range(100):
      key += 1
      item, chunks = make_step(key, episode, step)
      try:
        table.insert_or_assign(item, chunks, timeout_ms=1000)
      except reverb.DeadlineExceededError:
        continue  # Rate limited; the insert stays queued.
      counts['inserted'] += 1
      if stop.is_set():
        return


def learner(table, stop, counts, batch_size):
  rng = np.random.default_rng(0)
  while not stop.is_set():
    try:
      batch = table.sample(batch_size, timeout_ms=1000)
    except reverb.DeadlineExceededError:
      continue
    updates = []
    for info_bytes, chunk_bytes in batch:
      info = schema_pb2.SampleInfo.FromString(info_bytes)
      chunk = schema_pb2.ChunkData.FromString(chunk_bytes[0])
      frame = np.frombuffer(chunk.data.tensors[0].tensor_content, np.uint8)
      assert frame.size == np.prod(FRAME_SHAPE)
      assert frame[0] == info.item.key % 251, 'sampled the wrong frame'
      updates.append((info.item.key, float(rng.uniform(0.1, 2.0))))
    table.mutate_items(updates, [])
    counts['sampled'] += len(batch)


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--seconds', type=float, default=10)
  parser.add_argument('--actors', type=int, default=2)
  parser.add_argument('--batch_size', type=int, default=32)
  args = parser.parse_args()

  table = reverb.Table(
      name='replay',
      sampler=reverb.selectors.Prioritized(priority_exponent=0.8),
      remover=reverb.selectors.Fifo(),
      max_size=10_000,
      rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
          samples_per_insert=4.0, min_size_to_sample=100, error_buffer=400.0),
      signature={'frame': reverb.specs.TensorSpec(FRAME_SHAPE, np.uint8)})
  internal = table.internal_table
  stop = threading.Event()
  counts = {'inserted': 0, 'sampled': 0}
  threads = [
      threading.Thread(target=actor, args=(internal, i, stop, counts))
      for i in range(args.actors)
  ]
  threads.append(threading.Thread(
      target=learner, args=(internal, stop, counts, args.batch_size)))
  for t in threads:
    t.start()
  start = last = time.time()
  last_counts = dict(counts)
  while time.time() - start < args.seconds:
    time.sleep(min(1.0, args.seconds))
    now = time.time()
    rates = {k: (counts[k] - last_counts[k]) / (now - last) for k in counts}
    last, last_counts = now, dict(counts)
    print(f'{now - start:5.1f}s  inserts/s {rates["inserted"]:9.0f}  '
          f'samples/s {rates["sampled"]:9.0f}  '
          f'size {table.info.current_size}', flush=True)
  stop.set()
  for t in threads:
    t.join()
  internal.close()
  info = table.info
  print(f'done: {counts["inserted"]} inserted, {counts["sampled"]} sampled, '
        f'{info.num_episodes} episodes in the table, '
        f'{info.num_unique_samples} unique items sampled')
  assert counts['inserted'] > 0 and counts['sampled'] > 0


if __name__ == '__main__':
  main()
