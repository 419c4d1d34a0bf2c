"""Main job: a Reverb server with actors and a learner in other processes.

The server holds a prioritized replay table limited by SampleToInsertRatio.
Actor processes write episodes of 84x84x4 uint8 frames with a
TrajectoryWriter, one item per pair of consecutive steps; a learner process samples
batches over gRPC, checks every frame it gets and updates priorities. The
server's counters are printed once per second.

  .venv/bin/python examples/actor_learner.py [--seconds 10] [--actors 2]
"""

import argparse
import multiprocessing
import sys
import time

import numpy as np

import reverb

FRAME_SHAPE = (84, 84, 4)
EPISODE_LENGTH = 50
BATCH_SIZE = 32


def frame(actor: int, step: int) -> np.ndarray:
  return np.full(FRAME_SHAPE, (actor * 7 + step) % 251, np.uint8)


def actor(address: str, index: int, stop) -> None:
  client = reverb.Client(address)
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  try:
    while not stop.is_set():
      for step in range(EPISODE_LENGTH):
        writer.append({'frame': frame(index, step), 'step': np.int64(step)})
        if step > 0:  # Pairs of consecutive steps, as an N-step adder.
          writer.create_item('replay', 1.0, {
              'frame': writer.history['frame'][-2:],
              'step': writer.history['step'][-2:],
          })
        # Keep at most a few items unconfirmed (the rate limiter may hold
        # them back).
        writer.flush(block_until_num_items=8)
      writer.end_episode()
  except RuntimeError:
    if not stop.is_set():
      raise  # Otherwise: the server stopped under a rate-limited insert.
  finally:
    writer.close()


def learner(address: str, stop, failures) -> None:
  client = reverb.Client(address)
  rng = np.random.default_rng(0)
  try:
    while not stop.is_set():
      try:
        batch = list(client.sample('replay', num_samples=BATCH_SIZE,
                                   emit_timesteps=False, timeout=1.0))
      except reverb.DeadlineExceededError:
        continue  # Rate limited while actors catch up.
      updates = {}
      for sample in batch:
        frames, steps = sample.data  # Flattened in key order: frame, step.
        if frames.shape != (2,) + FRAME_SHAPE or steps[1] != steps[0] + 1 or (
            (frames[1].astype(int) - frames[0]) % 251 != 1).any():
          failures.value += 1
        updates[sample.info.key] = float(rng.uniform(0.1, 2.0))
      client.mutate_priorities('replay', updates=updates)
  except RuntimeError:
    if not stop.is_set():
      raise  # Otherwise: the server stopped under a call.


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--seconds', type=float, default=10)
  parser.add_argument('--actors', type=int, default=2)
  args = parser.parse_args()

  server = reverb.Server(tables=[
      reverb.Table(
          name='replay',
          sampler=reverb.selectors.Prioritized(priority_exponent=0.8),
          remover=reverb.selectors.Fifo(),
          max_size=10_000,
          rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
              samples_per_insert=8.0, min_size_to_sample=100,
              error_buffer=2_000.0)),
  ])
  address = f'localhost:{server.port}'
  print(f'server listening on {address}', flush=True)

  context = multiprocessing.get_context('spawn')
  stop = context.Event()
  failures = context.Value('i', 0)
  processes = [context.Process(target=actor, args=(address, i, stop))
               for i in range(args.actors)]
  processes.append(context.Process(target=learner,
                                   args=(address, stop, failures)))
  for process in processes:
    process.start()

  client = server.localhost_client()
  start = time.monotonic()
  last_inserts = last_samples = 0
  while time.monotonic() - start < args.seconds:
    time.sleep(1.0)
    info = client.server_info(timeout=10)['replay']
    inserts = info.rate_limiter_info.insert_stats.completed
    samples = info.rate_limiter_info.sample_stats.completed
    print(f'{time.monotonic() - start:5.1f}s  size {info.current_size:6d}  '
          f'inserts/s {inserts - last_inserts:6d}  '
          f'samples/s {samples - last_samples:6d}  '
          f'frames sampled/s {2 * (samples - last_samples):7d}', flush=True)
    last_inserts, last_samples = inserts, samples

  stop.set()
  deadline = time.monotonic() + 2
  for process in processes:
    process.join(timeout=max(0.0, deadline - time.monotonic()))
  # Stopping the server ends calls still blocked on the rate limiter.
  server.stop()
  for process in processes:
    process.join(timeout=15)
    if process.is_alive():
      process.kill()
  print(f'done: {last_inserts} inserts, {last_samples} samples, '
        f'{failures.value} bad samples', flush=True)
  return 1 if failures.value or last_samples == 0 else 0


if __name__ == '__main__':
  sys.exit(main())
