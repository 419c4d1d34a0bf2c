"""The TensorFlow ops over a server's unix domain socket (`unix:PATH`):
datasets made from the table's signature and by hand, and TFClient."""

import numpy as np
import pytest
import tensorflow as tf

import reverb

TIMEOUT = 30


@pytest.fixture(name='target')
def target_fixture(tmp_path):
  path = str(tmp_path / 'reverb.sock')
  server = reverb.Server([
      reverb.Table('fixed', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   1000, reverb.rate_limiters.MinSize(1), max_times_sampled=1,
                   signature={'step': tf.TensorSpec([2], tf.int64)}),
      reverb.Table.queue('queue', 100),
  ], port=None, unix_socket_path=path)
  with server.localhost_client().trajectory_writer(
      num_keep_alive_refs=2) as writer:
    for t in range(6):
      writer.append({'step': np.int64(t)})
      if t >= 1:
        writer.create_item('fixed', 1.0,
                           {'step': writer.history['step'][-2:]})
  yield f'unix:{path}'
  server.stop()


def test_trajectory_dataset_from_the_signature(target):
  dataset = reverb.TrajectoryDataset.from_table_signature(
      target, 'fixed', max_in_flight_samples_per_worker=2, max_samples=5)
  assert [s.data['step'].numpy().tolist() for s in dataset] == [
      [0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]


def test_tf_client_and_timestep_dataset(target):
  client = reverb.TFClient(target)
  for value in (1.5, 2.5, 3.5):
    client.insert([tf.constant(value)], tf.constant(['queue']),
                  tf.constant([1.0], tf.float64))
  assert client.sample('queue', [tf.float32]).data[0].numpy() == 1.5
  timesteps = reverb.TimestepDataset(
      target, 'queue', dtypes=(tf.float32,), shapes=([],),
      max_in_flight_samples_per_worker=1, num_workers_per_iterator=1,
      max_samples=2)
  assert [float(s.data[0]) for s in timesteps] == [2.5, 3.5]
