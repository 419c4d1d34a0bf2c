"""A tf.data learner: TrajectoryDataset batches into a tf.function step.

  .venv/bin/python examples/tf_learner.py [--steps 20]
"""

import argparse

import numpy as np
import tensorflow as tf

import reverb


def run(steps: int, batch_size: int = 16):
  server = reverb.Server(tables=[
      reverb.Table(
          name='sequences',
          sampler=reverb.selectors.Uniform(),
          remover=reverb.selectors.Fifo(),
          max_size=1000,
          rate_limiter=reverb.rate_limiters.MinSize(10),
          signature={
              'observation': tf.TensorSpec([5, 3], tf.float32),
              'action': tf.TensorSpec([5], tf.int32),
          }),
  ])
  client = server.localhost_client()
  with client.trajectory_writer(num_keep_alive_refs=5) as writer:
    for t in range(200):
      writer.append({'observation': np.full([3], t, np.float32),
                     'action': np.int32(2)})  # A policy to imitate.
      if writer.episode_steps >= 5:
        writer.create_item('sequences', 1.0, {
            'observation': writer.history['observation'][-5:],
            'action': writer.history['action'][-5:]})
  dataset = reverb.TrajectoryDataset.from_table_signature(
      f'localhost:{server.port}', 'sequences',
      max_in_flight_samples_per_worker=2 * batch_size).batch(batch_size)
  weights = tf.Variable(tf.zeros([3, 4]))
  optimizer = tf.keras.optimizers.SGD(0.5)

  @tf.function
  def train_step(batch):
    with tf.GradientTape() as tape:
      logits = tf.einsum('btd,da->bta', batch.data['observation'] / 200,
                         weights)
      loss = tf.reduce_mean(
          tf.nn.sparse_softmax_cross_entropy_with_logits(
              labels=batch.data['action'], logits=logits))
    optimizer.apply_gradients(
        [(tape.gradient(loss, weights), weights)])
    return loss

  losses = [float(train_step(batch)) for batch in dataset.take(steps)]
  server.stop()
  return losses


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=20)
  args = parser.parse_args()
  losses = run(args.steps)
  print(f'{len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}')


if __name__ == '__main__':
  main()
