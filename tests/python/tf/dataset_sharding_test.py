"""TrajectoryDataset, TimestepDataset and TFClient over several servers
(shards, docs/sharding.md): samples from every shard, the signature check
on the merged table info, inserts and updates that reach the shards."""

import numpy as np
import pytest
import tensorflow as tf

import reverb

TIMEOUT = 30  # Seconds; against hangs only.
SIZES = (3, 5, 7)  # Items per shard, each of one step.
SIGNATURE = {'id': tf.TensorSpec([1], tf.int64),
             'obs': tf.TensorSpec([1, 2], tf.float32)}
DTYPES = {'id': tf.int64, 'obs': tf.float32}


@pytest.fixture(name='servers')
def servers_fixture():
  servers = [
      reverb.Server([
          reverb.Table('signed', reverb.selectors.Uniform(),
                       reverb.selectors.Fifo(), 1000,
                       reverb.rate_limiters.MinSize(1), signature=SIGNATURE),
          reverb.Table('unsigned', reverb.selectors.Uniform(),
                       reverb.selectors.Fifo(), 1000,
                       reverb.rate_limiters.MinSize(1)),
          reverb.Table('prioritized', reverb.selectors.Prioritized(1.0),
                       reverb.selectors.Fifo(), 1000,
                       reverb.rate_limiters.MinSize(1)),
      ]) for _ in SIZES
  ]
  for s, server in enumerate(servers):
    with server.localhost_client().trajectory_writer(1) as writer:
      for i in range(SIZES[s]):
        writer.append({'id': np.int64(1000 * s + i),
                       'obs': np.full([2], s, np.float32)})
        for table in ('signed', 'unsigned'):
          writer.create_item(table, 1.0, {'id': writer.history['id'][-1:],
                                          'obs': writer.history['obs'][-1:]})
  yield servers
  for server in servers:
    server.stop()


def addresses_of(servers):
  return [f'localhost:{server.port}' for server in servers]


def shards_of(ids):
  return {int(i) // 1000 for i in np.asarray(ids).reshape(-1)}


def test_trajectory_dataset_from_table_signature_samples_every_shard(servers):
  dataset = reverb.TrajectoryDataset.from_table_signature(
      addresses_of(servers), 'signed', max_in_flight_samples_per_worker=10,
      max_samples=300)
  assert dataset.element_spec.data['obs'].shape == (1, 2)
  ids, obs = [], []
  for batch in dataset.batch(100):
    ids.extend(batch.data['id'].numpy()[:, 0])
    obs.extend(batch.data['obs'].numpy()[:, 0, 0])
  assert len(ids) == 300
  assert shards_of(ids) == {0, 1, 2}
  # Each sample is whole: its data all comes from its own shard.
  assert [i // 1000 for i in ids] == [int(o) for o in obs]


def test_timestep_dataset_takes_a_tensor_of_addresses(servers):
  dataset = reverb.TimestepDataset(
      tf.constant(addresses_of(servers)), 'unsigned', dtypes=DTYPES,
      shapes={'id': [], 'obs': [2]}, max_in_flight_samples_per_worker=10,
      max_samples=300)
  assert shards_of([s.data['id'] for s in dataset]) == {0, 1, 2}


def test_dataset_checks_the_merged_signature(servers):
  dataset = reverb.TrajectoryDataset(
      addresses_of(servers), 'signed',
      dtypes={'id': tf.int32, 'obs': tf.float32},
      shapes={'id': [1], 'obs': [1, 2]}, max_in_flight_samples_per_worker=10)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='Requested incompatible tensor'):
    next(iter(dataset))


def test_dataset_rejects_addresses_no_client_takes(servers):
  address = addresses_of(servers)[0]
  for addresses in ([[address]], [address, address]):
    dataset = reverb.TrajectoryDataset(
        tf.constant(addresses), 'signed', dtypes=DTYPES,
        shapes={'id': [1], 'obs': [1, 2]}, max_in_flight_samples_per_worker=10)
    with pytest.raises(tf.errors.InvalidArgumentError):
      next(iter(dataset))


def test_tf_client_over_shards_samples_inserts_and_updates(servers):
  addresses = addresses_of(servers)
  client = reverb.TFClient(addresses)
  assert client.server_address == addresses
  ids = [client.sample('signed', DTYPES).data['id'].numpy() for _ in range(300)]
  assert shards_of(ids) == {0, 1, 2}

  for step in range(6):
    client.insert([tf.constant(np.int64(step))], tf.constant(['prioritized']),
                  tf.constant([1.0], tf.float64))
  python_client = reverb.Client(addresses)
  assert python_client.server_info(
      timeout=TIMEOUT)['prioritized'].current_size == 6

  # An update reaches the shard that holds the key.
  sample = next(python_client.sample('prioritized', emit_timesteps=False,
                                     timeout=TIMEOUT))
  client.update_priorities('prioritized',
                           tf.constant([int(sample.info.key)], tf.uint64),
                           tf.constant([7.0], tf.float64))
  priorities = {}
  shards = python_client.shard_info(timeout=TIMEOUT)
  for address in addresses:
    if shards[address]['prioritized'].current_size:
      for _ in range(50):
        info = next(reverb.Client(address).sample(
            'prioritized', emit_timesteps=False, timeout=TIMEOUT)).info
        priorities[int(info.key)] = float(info.priority)
  assert priorities[int(sample.info.key)] == 7.0


def test_tf_client_in_a_tf_function_takes_addresses_as_an_argument(servers):

  @tf.function
  def sample_id(addresses):
    return reverb.TFClient(addresses).sample('signed', DTYPES).data['id']

  addresses = tf.constant(addresses_of(servers))
  ids = [sample_id(addresses).numpy() for _ in range(200)]
  assert shards_of(ids) == {0, 1, 2}
