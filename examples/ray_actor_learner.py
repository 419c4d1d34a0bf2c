"""Actors and a learner as Ray tasks, over a replay buffer of several shards.

A `reverb.ray.ReplayCluster` starts the Reverb servers (3 shards) as Ray
actors spread over the nodes. Actor tasks (4) write episodes with a
TrajectoryWriter through one client over all shards, one item per pair of
consecutive steps; a learner task samples batches from all shards with a
ReplayIterator and checks every sample. Data goes over gRPC between the
tasks and the servers, never through Ray's object store. The driver prints
the shards' counters once per second.

  .venv/bin/python examples/ray_actor_learner.py [--seconds 3] [--actors 4]
      [--shards 3]
  # The same on a running Ray cluster (`ray start`):
  python examples/ray_actor_learner.py --address auto --seconds 60
"""

import argparse
import sys
import time

import numpy as np
import ray

import reverb
import reverb.ray

OBSERVATION_SIZE = 64
EPISODE_LENGTH = 50
BATCH_SIZE = 32


def make_tables():
  """The tables of each shard (called by the shards' actors)."""
  return [reverb.Table(
      name='replay',
      sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(),
      max_size=10_000,
      rate_limiter=reverb.rate_limiters.MinSize(10),
      signature={
          'observation': reverb.specs.TensorSpec([2, OBSERVATION_SIZE],
                                                 np.float32),
          'step': reverb.specs.TensorSpec([2], np.int64),
      })]


def observation(actor_index: int, step: int) -> np.ndarray:
  return np.full([OBSERVATION_SIZE], actor_index * 1000 + step, np.float32)


@ray.remote(num_cpus=1)
def actor(addresses, index: int, seconds: float) -> int:
  """Writes episodes for `seconds`; returns the number of items written."""
  client = reverb.Client(addresses)
  items = 0
  deadline = time.monotonic() + seconds
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    while time.monotonic() < deadline:
      for step in range(EPISODE_LENGTH):
        writer.append({'observation': observation(index, step),
                       'step': np.int64(step)})
        if step > 0:  # Pairs of consecutive steps, as an N-step adder.
          writer.create_item('replay', 1.0, {
              'observation': writer.history['observation'][-2:],
              'step': writer.history['step'][-2:],
          })
          items += 1
        writer.flush(block_until_num_items=8)
      writer.end_episode(timeout_ms=30_000)
  return items


@ray.remote(num_cpus=1)
def learner(addresses, seconds: float):
  """Samples batches for `seconds`; returns (samples, bad samples)."""
  samples = bad = 0
  deadline = time.monotonic() + seconds
  with reverb.ReplayIterator(addresses, 'replay', batch_size=BATCH_SIZE,
                             rate_limiter_timeout_ms=30_000) as iterator:
    for batch in iterator:
      observations = batch.data['observation']  # [batch, 2, size]
      steps = batch.data['step']  # [batch, 2]
      values = observations[:, :, 0]  # actor * 1000 + step
      good = ((observations == values[:, :, None]).all(axis=(1, 2)) &
              (values[:, 0] % 1000 == steps[:, 0]) &
              (values[:, 1] == values[:, 0] + 1) &
              (steps[:, 1] == steps[:, 0] + 1))
      samples += len(good)
      bad += int((~good).sum())
      if time.monotonic() >= deadline:
        break
  return samples, bad


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--seconds', type=float, default=3)
  parser.add_argument('--actors', type=int, default=4)
  parser.add_argument('--shards', type=int, default=3)
  parser.add_argument('--address', default=None,
                      help='Ray cluster to join ("auto": the local one); '
                      'without it Ray starts on this machine')
  args = parser.parse_args()

  if args.address:
    ray.init(address=args.address)
  else:  # A CPU for every shard and task.
    ray.init(num_cpus=args.shards + args.actors + 1, include_dashboard=False)
  with reverb.ray.ReplayCluster(make_tables, args.shards) as cluster:
    print(f'{args.shards} shards: {" ".join(cluster.addresses)}', flush=True)
    shard_clients = [reverb.Client(address) for address in cluster.addresses]
    for client in shard_clients:  # Connected before the clock starts.
      client.server_info(timeout=10)
    writers = [actor.remote(cluster.addresses, i, args.seconds)
               for i in range(args.actors)]
    sampled = learner.remote(cluster.addresses, args.seconds)

    start = last_time = time.monotonic()
    last_inserts = last_samples = 0
    pending = writers + [sampled]
    while pending:  # Once per second, and once the tasks have ended.
      _, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
      infos = [c.server_info(timeout=10)['replay'] for c in shard_clients]
      inserts = [i.rate_limiter_info.insert_stats.completed for i in infos]
      samples = sum(i.rate_limiter_info.sample_stats.completed for i in infos)
      now = time.monotonic()
      sizes = ' '.join(f'{i.current_size:5d}' for i in infos)
      seconds = max(now - last_time, 1e-3)
      print(f'{now - start:5.1f}s  sizes {sizes}  inserts/s '
            f'{(sum(inserts) - last_inserts) / seconds:7.0f}  '
            f'samples/s {(samples - last_samples) / seconds:7.0f}', flush=True)
      last_time, last_inserts, last_samples = now, sum(inserts), samples
    items = sum(ray.get(writers))
    sampled, bad = ray.get(sampled)
  print(f'done: {items} items written (by shard: '
        f'{" ".join(map(str, inserts))}), {sampled} sampled '
        f'({sampled / args.seconds:.0f}/s), {bad} bad samples', flush=True)
  ray.shutdown()
  return 1 if bad or samples == 0 else 0


if __name__ == '__main__':
  sys.exit(main())
