"""An Acme-style N-step transition adder on a TrajectoryWriter.

Each step appends (observation, action, reward, discount); once N steps are
in the history, an item holds the first observation and action, the N
rewards and discounts, and the last observation.

  .venv/bin/python examples/n_step_adder.py [--n 3] [--episodes 5]
"""

import argparse

import numpy as np

import reverb

OBS_SHAPE = (4,)


def run(n: int, episodes: int, episode_length: int = 20):
  server = reverb.Server(tables=[
      reverb.Table(
          name='transitions',
          sampler=reverb.selectors.Prioritized(priority_exponent=0.6),
          remover=reverb.selectors.Fifo(),
          max_size=10_000,
          rate_limiter=reverb.rate_limiters.MinSize(1)),
  ])
  client = server.localhost_client()
  rng = np.random.default_rng(0)
  with client.trajectory_writer(num_keep_alive_refs=n + 1) as writer:
    for _ in range(episodes):
      for t in range(episode_length):
        writer.append({
            'observation': rng.normal(size=OBS_SHAPE).astype(np.float32),
            'action': np.int32(rng.integers(4)),
            'reward': np.float32(t),
            'discount': np.float32(0.99),
        })
        if writer.episode_steps > n:
          history = writer.history
          writer.create_item('transitions', priority=1.0, trajectory={
              'observation': history['observation'][-n - 1],
              'action': history['action'][-n - 1],
              'rewards': history['reward'][-n - 1:-1],
              'discounts': history['discount'][-n - 1:-1],
              'next_observation': history['observation'][-1],
          })
      writer.end_episode(timeout_ms=30_000)
  size = client.server_info()['transitions'].current_size
  sample = next(client.sample('transitions', emit_timesteps=False,
                              timeout=30))
  server.stop()
  return size, sample


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--n', type=int, default=3)
  parser.add_argument('--episodes', type=int, default=5)
  args = parser.parse_args()
  size, sample = run(args.n, args.episodes)
  # Flattened in key order: action, discounts, next_observation,
  # observation, rewards.
  print(f'{size} transitions; one of them: rewards {sample.data[4]}, '
        f'key {sample.info.key}')


if __name__ == '__main__':
  main()
