"""TrajectoryDataset, TimestepDataset and TFClient."""

import numpy as np
import pytest
import tensorflow as tf

import reverb

TIMEOUT = 30


@pytest.fixture(name='server')
def server_fixture():
  server = reverb.Server([
      reverb.Table('fixed', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 1000,
                   reverb.rate_limiters.MinSize(1),
                   signature={'obs': tf.TensorSpec([3, 2], tf.float32),
                              'step': tf.TensorSpec([3], tf.int64)}),
      reverb.Table('varied', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   1000, reverb.rate_limiters.MinSize(1),
                   max_times_sampled=1),
      reverb.Table('unsigned', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 1000,
                   reverb.rate_limiters.MinSize(1)),
      reverb.Table.queue('queue', 100),
  ])
  client = server.localhost_client()
  with client.trajectory_writer(num_keep_alive_refs=4) as writer:
    for t in range(12):
      writer.append({'obs': np.full([2], t, np.float32), 'step': np.int64(t)})
      if t >= 2:
        writer.create_item('fixed', 1.0, {'obs': writer.history['obs'][-3:],
                                          'step': writer.history['step'][-3:]})
        length = 2 + t % 3  # 2, 3 or 4 steps.
        if t >= 3:
          writer.create_item('varied', 1.0,
                             writer.history['step'][-length:])
        writer.create_item('unsigned', 1.0, [writer.history['step'][-1]])
  yield server
  server.stop()


def address(server):
  return f'localhost:{server.port}'


def check_fixed(sample):
  obs, step = sample.data['obs'].numpy(), sample.data['step'].numpy()
  assert obs.shape == (3, 2) and step.shape == (3,)
  np.testing.assert_array_equal(step, [step[0], step[0] + 1, step[0] + 2])
  np.testing.assert_array_equal(obs[:, 0], step)


def test_from_table_signature_batches_and_prefetches(server):
  dataset = reverb.TrajectoryDataset.from_table_signature(
      address(server), 'fixed', max_in_flight_samples_per_worker=10,
      max_samples=40)
  assert isinstance(dataset, tf.data.Dataset)
  spec = dataset.element_spec
  assert isinstance(spec, reverb.ReplaySample)
  assert spec.info.key.dtype == tf.uint64
  assert spec.info.times_sampled.dtype == tf.int32
  assert spec.data['obs'].shape == (3, 2)
  batches = list(dataset.batch(16).prefetch(2))
  assert [b.info.key.shape[0] for b in batches] == [16, 16, 8]
  for batch in batches:
    assert batch.data['obs'].shape[1:] == (3, 2)
  samples = list(reverb.TrajectoryDataset.from_table_signature(
      address(server), 'fixed', 10, max_samples=5))
  for sample in samples:
    check_fixed(sample)
    assert sample.info.table_size.numpy() == 10


def test_variable_length_trajectories(server):
  dataset = reverb.TrajectoryDataset(
      address(server), 'varied', dtypes=(tf.int64,), shapes=([None],),
      max_in_flight_samples_per_worker=1, num_workers_per_iterator=1,
      max_samples=9)
  lengths = [len(s.data[0]) for s in dataset]
  assert lengths == [2 + t % 3 for t in range(3, 12)]


def test_timestep_dataset_splits_items(server):
  dataset = reverb.TimestepDataset(
      address(server), 'varied', dtypes=(tf.int64,), shapes=([],),
      max_in_flight_samples_per_worker=1, num_workers_per_iterator=1,
      max_samples=2)
  steps = [int(s.data[0]) for s in dataset]
  # The two oldest items: steps 2..3 and 2..4.
  assert steps == [2, 3, 2, 3, 4]


def test_end_of_sequence_on_rate_limiter_timeout(server):
  client = server.localhost_client()
  for i in range(3):
    client.insert(np.int64(i), priorities={'queue': 1.0})
  dataset = reverb.TrajectoryDataset(
      address(server), 'queue', dtypes=tf.int64, shapes=tf.TensorShape([1]),
      max_in_flight_samples_per_worker=1, rate_limiter_timeout_ms=300)
  assert [int(s.data[0]) for s in dataset] == [0, 1, 2]


def test_in_tf_function_and_several_iterators(server):
  dataset = reverb.TrajectoryDataset.from_table_signature(
      address(server), 'fixed', 4, max_samples=8)

  @tf.function
  def total(ds):
    result = tf.constant(0, tf.int64)
    for sample in ds:
      result += tf.reduce_sum(sample.data['step'])
    return result

  first, second = iter(dataset), iter(dataset)
  assert next(first).data['obs'].shape == (3, 2)
  assert next(second).data['obs'].shape == (3, 2)
  assert int(total(dataset)) > 0


def test_batch_asks_the_sampler_for_whole_batches(server):
  dataset = reverb.TrajectoryDataset.from_table_signature(
      address(server), 'fixed', max_in_flight_samples_per_worker=10,
      max_samples=40)
  batched = dataset.batch(16, drop_remainder=True)
  assert batched.element_spec.info.key.shape == (16,)
  assert batched.element_spec.data['obs'].shape == (16, 3, 2)
  batches = list(batched)
  assert len(batches) == 2  # The last 8 samples are dropped.
  for batch in batches:
    assert batch.info.key.shape == (16,)
    for i in range(16):
      check_fixed(reverb.ReplaySample(
          batch.info, tf.nest.map_structure(lambda t: t[i], batch.data)))
  # A transformation before batch() batches single samples as usual.
  mapped = dataset.map(lambda s: s.data['step']).batch(16)
  assert [b.shape for b in mapped] == [(16, 3), (16, 3), (8, 3)]


def test_each_iterator_samples_through_its_own_streams(server):
  dataset = reverb.TrajectoryDataset.from_table_signature(
      address(server), 'fixed', 2, max_samples=5)
  first, second = iter(dataset), iter(dataset)
  counts = [0, 0]
  for _ in range(5):
    for i, iterator in enumerate((first, second)):
      check_fixed(next(iterator))
      counts[i] += 1
  # max_samples counts per iterator: each ends after its own five.
  for iterator in (first, second):
    with pytest.raises(StopIteration):
      next(iterator)
  assert counts == [5, 5]


def test_string_columns():
  server = reverb.Server([reverb.Table(
      'words', reverb.selectors.Fifo(), reverb.selectors.Fifo(), 10,
      reverb.rate_limiters.MinSize(1), max_times_sampled=1,
      signature={'word': tf.TensorSpec([2], tf.string),
                 'n': tf.TensorSpec([], tf.int32)})])
  try:
    with server.localhost_client().trajectory_writer(2) as writer:
      for i in range(3):
        writer.append({'word': np.array([f'w{i}', 'x' * 40 * i], object),
                       'n': np.int32(i)})
        writer.create_item('words', 1.0, {
            'word': writer.history['word'][-1],
            'n': writer.history['n'][-1]})
    dataset = reverb.TrajectoryDataset.from_table_signature(
        address(server), 'words', 3, max_samples=3)
    samples = list(dataset)
    assert [s.data['word'].numpy().tolist() for s in samples] == [
        [f'w{i}'.encode(), b'x' * 40 * i] for i in range(3)]
    assert [int(s.data['n']) for s in samples] == [0, 1, 2]
  finally:
    server.stop()


def test_graph_mode_session(server):
  with tf.Graph().as_default():
    dataset = reverb.TrajectoryDataset(
        address(server), 'fixed', dtypes={'obs': tf.float32, 'step': tf.int64},
        shapes={'obs': [3, 2], 'step': [3]},
        max_in_flight_samples_per_worker=2, max_samples=3)
    element = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    with tf.compat.v1.Session() as session:
      for _ in range(3):
        value = session.run(element)
        assert value.data['obs'].shape == (3, 2)
      with pytest.raises(tf.errors.OutOfRangeError):
        session.run(element)


def test_signature_mismatch_is_an_error(server):
  dataset = reverb.TrajectoryDataset(
      address(server), 'fixed', dtypes={'obs': tf.float64, 'step': tf.int64},
      shapes={'obs': [3, 2], 'step': [3]},
      max_in_flight_samples_per_worker=1)
  with pytest.raises(tf.errors.InvalidArgumentError, match='signature'):
    next(iter(dataset))
  # Without a signature the data itself is checked.
  dataset = reverb.TrajectoryDataset(
      address(server), 'unsigned', dtypes=(tf.float32,), shapes=([1],),
      max_in_flight_samples_per_worker=1)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='Received incompatible tensor'):
    next(iter(dataset))


@pytest.mark.parametrize('kwargs', [
    dict(max_in_flight_samples_per_worker=0),
    dict(num_workers_per_iterator=0),
    dict(num_workers_per_iterator=-2),
    dict(max_samples_per_stream=0),
    dict(rate_limiter_timeout_ms=-2),
    dict(max_samples=0),
])
def test_argument_validation(kwargs):
  arguments = dict(max_in_flight_samples_per_worker=1)
  arguments.update(kwargs)
  with pytest.raises(ValueError):
    reverb.TrajectoryDataset('localhost:1', 't', dtypes=tf.int64, shapes=[],
                             **arguments)


def test_structure_mismatch_and_missing_signature(server):
  with pytest.raises(ValueError, match='structure'):
    reverb.TrajectoryDataset('localhost:1', 't', dtypes=(tf.int64, tf.int64),
                             shapes=([],), max_in_flight_samples_per_worker=1)
  with pytest.raises(ValueError, match='does not have a signature'):
    reverb.TrajectoryDataset.from_table_signature(address(server), 'varied', 1)
  with pytest.raises(ValueError, match='nope'):
    reverb.TrajectoryDataset.from_table_signature(address(server), 'nope', 1)


def test_tf_client_eager_and_graph(server):
  client = reverb.TFClient(address(server))
  sample = client.sample('varied', [tf.int64])
  assert sample.info.key.dtype == tf.uint64
  assert sample.data[0].shape == ()
  client.insert([tf.constant([1.5, 2.5])], tf.constant(['unsigned']),
                tf.constant([2.0], tf.float64))
  keys = tf.constant([sample.info.key.numpy()], tf.uint64)
  py_client = server.localhost_client()
  assert py_client.server_info()['unsigned'].current_size == 11  # + 1 insert.
  # (The sampled 'varied' item is gone: max_times_sampled=1.)
  key = next(py_client.sample('unsigned', emit_timesteps=False,
                              timeout=TIMEOUT)).info.key
  keys = tf.constant([key], tf.uint64)
  client.update_priorities('unsigned', keys, tf.constant([7.0], tf.float64))
  priorities = {s.info.key: s.info.priority for s in py_client.sample(
      'unsigned', 300, emit_timesteps=False, timeout=TIMEOUT)}
  assert priorities[key] == 7.0
  with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
    client.update_priorities('varied', keys, tf.constant([1.0, 2.0],
                                                         tf.float64))
  with tf.Graph().as_default():
    graph_client = reverb.TFClient(address(server))
    sampled = graph_client.sample('varied', [tf.int64])
    with tf.compat.v1.Session() as session:
      assert session.run(sampled.info.table_size) >= 1
