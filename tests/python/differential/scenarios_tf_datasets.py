"""Differential scenarios: TrajectoryDataset and TimestepDataset (element
specs, what they sample, and the errors of a dataset that does not fit its
table).

TensorFlow wraps an op's error in text of its own ("{{function_node ...}}",
the iterator's path, "[Op:...]"), which differs between versions and
pipelines; `_sample_error` keeps the error's class and the op's message.
"""

import collections
import re

import numpy as np

Step = collections.namedtuple('Step', ['y', 'x'])


def _server(reverb, env):
  """A server whose table 'nested' holds 3 items of a nested signature,
  'unsigned' one item without signature and 'empty' none."""
  tf = env.tf
  signature = {'a': tf.TensorSpec([None, 2], tf.float32, name='custom'),
               'c': [tf.TensorSpec([], tf.string)],
               'n': Step(tf.TensorSpec([], tf.bool),
                         tf.TensorSpec([3], tf.uint8))}
  address = env.server([
      reverb.Table('nested', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   100, reverb.rate_limiters.MinSize(1), signature=signature),
      reverb.Table('unsigned', reverb.selectors.Fifo(),
                   reverb.selectors.Fifo(), 100,
                   reverb.rate_limiters.MinSize(1)),
      reverb.Table('empty', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 100,
                   reverb.rate_limiters.MinSize(1)),
  ])
  client = reverb.Client(address)
  with client.trajectory_writer(2) as writer:
    for i in range(4):
      writer.append({'a': np.full([2], i, np.float32), 'c': [b'step%d' % i],
                     'n': Step(np.bool_(i % 2), np.full([3], i, np.uint8))})
      if i >= 1:
        history = writer.history
        writer.create_item('nested', 1.0, {
            'a': history['a'][-2:], 'c': [history['c'][0][-1]],
            'n': Step(history['n'].y[-1], history['n'].x[-1])})
    writer.create_item('unsigned', 1.0, [writer.history['a'][-1]])
  return address


def _nested_specs(tf, a_dtype=None, a_shape=None, x_shape=None):
  dtypes = {'a': a_dtype or tf.float32, 'c': (tf.string,),
            'n': Step(tf.bool, tf.uint8)}
  shapes = {'a': tf.TensorShape(a_shape or [None, 2]),
            'c': (tf.TensorShape([]),),
            'n': Step(tf.TensorShape([]), tf.TensorShape(x_shape or [3]))}
  return dtypes, shapes


def _spec(tf, element_spec):
  return tf.nest.map_structure(lambda s: [s.shape.as_list(), s.dtype.name],
                               element_spec)


def _sample_error(function):
  """What `function` returned, or its error's class and op message."""
  try:
    return function()
  except Exception as e:  # pylint: disable=broad-except
    message = re.sub(r'\{\{function_node [^}]*\}\}\s*', '', str(e))
    message = re.split(r'\s*\[Op:', message)[0]
    message = re.sub(r'^.*transformation with iterator: [^ ]+: ', '', message,
                     flags=re.S)
    return {'raised': type(e).__name__, 'message': message.strip()}


def _first_key(dataset):
  """The key of `dataset`'s first sample, or its error (as `_sample_error`)."""
  return _sample_error(lambda: next(iter(dataset)).info.key.numpy())


def scenario_datasets_are_v1_datasets(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dtypes, shapes = _nested_specs(tf)
  dataset = reverb.TrajectoryDataset(address, 'nested', dtypes, shapes,
                                     max_in_flight_samples_per_worker=2)
  return [isinstance(dataset, tf.compat.v1.data.Dataset),
          isinstance(dataset, tf.data.Dataset),
          isinstance(dataset.batch(2), tf.compat.v1.data.Dataset)]


def scenario_element_spec(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dataset = reverb.TrajectoryDataset.from_table_signature(
      address, 'nested', max_in_flight_samples_per_worker=2)
  return {'unbatched': _spec(tf, dataset.element_spec),
          'batched': _spec(tf, dataset.batch(3).element_spec),
          'dropped': _spec(tf, dataset.batch(3, drop_remainder=True)
                           .element_spec)}


def scenario_samples_of_a_nested_signature(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dtypes, shapes = _nested_specs(tf)
  dataset = reverb.TrajectoryDataset(address, 'nested', dtypes, shapes,
                                     max_in_flight_samples_per_worker=1,
                                     max_samples=2)
  samples = list(dataset)
  return [{'a': s.data['a'].numpy(), 'c': s.data['c'][0].numpy(),
           'x': s.data['n'].x.numpy(), 'probability': s.info.probability.numpy(),
           'table_size': s.info.table_size.numpy()} for s in samples]


def scenario_timesteps_of_an_unsigned_table(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dataset = reverb.TimestepDataset(tf.constant(address), tf.constant('unsigned'),
                                   (tf.float32,), (tf.TensorShape([2]),),
                                   max_in_flight_samples_per_worker=1,
                                   max_samples=1)
  return [s.data[0].numpy() for s in dataset]


def scenario_unknown_rank(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dataset = reverb.TrajectoryDataset(address, 'unsigned', (tf.float32,),
                                     (tf.TensorShape(None),),
                                     max_in_flight_samples_per_worker=1,
                                     max_samples=1)
  return {'spec': _spec(tf, dataset.element_spec.data),
          'shapes': [s.data[0].shape.as_list() for s in dataset]}


def scenario_rate_limiter_timeout_ends_the_dataset(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dataset = reverb.TrajectoryDataset(address, 'empty', tf.float32,
                                     tf.TensorShape([]),
                                     max_in_flight_samples_per_worker=1,
                                     rate_limiter_timeout_ms=50)
  return len(list(dataset))


def scenario_requested_dtype_differs_from_the_signature(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dtypes, shapes = _nested_specs(tf, a_dtype=tf.float64)
  dataset = reverb.TrajectoryDataset(address, 'nested', dtypes, shapes,
                                     max_in_flight_samples_per_worker=1)
  return _first_key(dataset)


def scenario_requested_shape_differs_from_the_signature(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dtypes, shapes = _nested_specs(tf, x_shape=[4])
  dataset = reverb.TrajectoryDataset(address, 'nested', dtypes, shapes,
                                     max_in_flight_samples_per_worker=1)
  return _first_key(dataset)


def scenario_requested_rank_differs_from_the_signature(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dtypes, shapes = _nested_specs(tf, a_shape=[2])
  dataset = reverb.TimestepDataset(address, 'nested', dtypes, shapes,
                                   max_in_flight_samples_per_worker=1)
  return _first_key(dataset)


def scenario_requested_fewer_tensors_than_the_signature(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dataset = reverb.TrajectoryDataset(address, 'nested', {'a': tf.float32},
                                     {'a': tf.TensorShape([None, 2])},
                                     max_in_flight_samples_per_worker=1)
  return _first_key(dataset)


def scenario_sampled_data_differs_from_the_request(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dataset = reverb.TrajectoryDataset(address, 'unsigned', tf.int32,
                                     tf.TensorShape([1, 2]),
                                     max_in_flight_samples_per_worker=1)
  return _first_key(dataset)


def scenario_unknown_table(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  dataset = reverb.TrajectoryDataset(address, 'missing', tf.int32,
                                     tf.TensorShape([]),
                                     max_in_flight_samples_per_worker=1)
  return _first_key(dataset)


def scenario_timesteps_of_squeezed_and_unsqueezed_columns(reverb, env):
  tf = env.tf
  address = env.server([reverb.Table(
      'mixed', reverb.selectors.Fifo(), reverb.selectors.Fifo(), 100,
      reverb.rate_limiters.MinSize(1))])
  with reverb.Client(address).trajectory_writer(2) as writer:
    for i in range(2):
      writer.append({'a': np.full([2], i, np.float32), 'b': np.int64(i)})
    writer.create_item('mixed', 1.0, [writer.history['a'][-2:],
                                      writer.history['b'][-1]])
  dataset = reverb.TimestepDataset(address, 'mixed', (tf.float32, tf.int64),
                                   (tf.TensorShape([2]), tf.TensorShape([])),
                                   max_in_flight_samples_per_worker=1)
  return _first_key(dataset)
