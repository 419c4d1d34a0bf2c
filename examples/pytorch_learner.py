"""A PyTorch learner fed by `reverb.ReplayIterator` through a DataLoader.

A toy Q-learning-like problem: each transition is (observation, action,
reward), with reward = observation . W[:, action] for a hidden W. A small
network learns Q(observation) so that Q[action] predicts the reward. The
`IterableDataset` yields the iterator's numpy batches as torch tensors;
`DataLoader(batch_size=None)` passes them through as they come, since
Reverb already batched them.

  .venv/bin/python -m pip install torch==2.13.0   # CPU build
  .venv/bin/python examples/pytorch_learner.py [--steps 100]
"""

import argparse
import sys

import numpy as np
import torch

import reverb

OBSERVATION_SIZE, NUM_ACTIONS = 4, 3


class ReplayDataset(torch.utils.data.IterableDataset):
  """Batches of (observation, action, reward) tensors from a Reverb table."""

  def __init__(self, server_address, table, batch_size, max_samples):
    super().__init__()
    self._args = (server_address, table, batch_size)
    self._max_samples = max_samples

  def __iter__(self):
    # Opened here, not in __init__, so that each DataLoader worker process
    # (num_workers > 0) gets its own streams.
    with reverb.ReplayIterator(*self._args, num_workers=2,
                               max_samples=self._max_samples) as iterator:
      for batch in iterator:
        yield {name: torch.from_numpy(value)
               for name, value in batch.data.items()}


def run(steps: int, batch_size: int = 32):
  server = reverb.Server(tables=[
      reverb.Table(
          name='replay',
          sampler=reverb.selectors.Uniform(),
          remover=reverb.selectors.Fifo(),
          max_size=1000,
          rate_limiter=reverb.rate_limiters.MinSize(100),
          signature={
              'observation': reverb.specs.TensorSpec([OBSERVATION_SIZE],
                                                     np.float32),
              'action': reverb.specs.TensorSpec([], np.int64),
              'reward': reverb.specs.TensorSpec([], np.float32),
          }),
  ])
  client = server.localhost_client()
  rng = np.random.default_rng(0)
  true_q = rng.normal(size=[OBSERVATION_SIZE, NUM_ACTIONS]).astype(np.float32)
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for _ in range(1000):
      observation = rng.normal(size=OBSERVATION_SIZE).astype(np.float32)
      action = rng.integers(NUM_ACTIONS)
      writer.append({'observation': observation,
                     'action': np.int64(action),
                     'reward': observation @ true_q[:, action]})
      writer.create_item('replay', 1.0, {
          name: column[-1] for name, column in writer.history.items()})

  torch.manual_seed(0)
  model = torch.nn.Sequential(torch.nn.Linear(OBSERVATION_SIZE, 32),
                              torch.nn.ReLU(),
                              torch.nn.Linear(32, NUM_ACTIONS))
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
  loader = torch.utils.data.DataLoader(
      ReplayDataset(f'localhost:{server.port}', 'replay', batch_size,
                    max_samples=steps * batch_size),
      batch_size=None)
  losses = []
  for batch in loader:
    q = model(batch['observation'])
    q_taken = q.gather(1, batch['action'].unsqueeze(1)).squeeze(1)
    loss = torch.nn.functional.mse_loss(q_taken, batch['reward'])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
  server.stop()
  return losses


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=100)
  args = parser.parse_args()
  losses = run(args.steps)
  # Single batches are noisy: compare the first and last few.
  window = max(1, len(losses) // 5)
  first, last = np.mean(losses[:window]), np.mean(losses[-window:])
  print(f'{len(losses)} batches, loss {first:.4f} -> {last:.4f}')
  if not last < first:
    sys.exit('loss did not decrease')


if __name__ == '__main__':
  main()
