"""A learner loop on `reverb.ReplayIterator`, without TensorFlow.

Batches arrive as numpy arrays stacked in C++ while worker threads keep
samples in flight; the same loop works inside a PyTorch `IterableDataset`
(`yield from iterator`) or a JAX training step. Priorities are updated
from the "loss" of each batch.

  .venv/bin/python examples/numpy_learner.py [--steps 50]
"""

import argparse

import numpy as np

import reverb

FRAME_SHAPE = (84, 84, 4)


def run(steps: int, batch_size: int = 32):
  server = reverb.Server(tables=[
      reverb.Table(
          name='replay',
          sampler=reverb.selectors.Prioritized(priority_exponent=0.8),
          remover=reverb.selectors.Fifo(),
          max_size=1000,
          rate_limiter=reverb.rate_limiters.MinSize(100),
          signature={
              'frame': reverb.specs.TensorSpec(FRAME_SHAPE, np.uint8),
              'reward': reverb.specs.TensorSpec([], np.float32),
          }),
  ])
  client = server.localhost_client()
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for i in range(500):
      writer.append({'frame': np.full(FRAME_SHAPE, i % 256, np.uint8),
                     'reward': np.float32(i % 7)})
      writer.create_item('replay', 1.0, {
          'frame': writer.history['frame'][-1],
          'reward': writer.history['reward'][-1]})
  losses = []
  with reverb.ReplayIterator(f'localhost:{server.port}', 'replay',
                             batch_size=batch_size, num_workers=2,
                             max_samples=steps * batch_size) as iterator:
    for batch in iterator:
      frames = batch.data['frame'].astype(np.float32) / 255
      loss = np.abs(frames.mean(axis=(1, 2, 3)) - batch.data['reward'] / 7)
      client.mutate_priorities('replay', updates=dict(
          zip(batch.info.key.tolist(), (loss + 1e-3).tolist())))
      losses.append(float(loss.mean()))
  server.stop()
  return losses


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=50)
  args = parser.parse_args()
  losses = run(args.steps)
  print(f'{len(losses)} batches, mean loss {np.mean(losses):.4f}')


if __name__ == '__main__':
  main()
