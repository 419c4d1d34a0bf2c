"""Differential scenarios (TensorFlow): the specs handed to users are
tf.TensorSpecs (structured_writer.infer_signature, server_info, Table.info),
and the argument and table errors of the datasets' constructors and
`from_table_signature`.

The first scenario runs before anything here imports TensorFlow: with our
package, infer_signature itself must import it.
"""

import collections

import numpy as np

Step = collections.namedtuple('Step', ['observation', 'action', 'extras'])


def _kind(spec):
  """The spec's class as (top-level package, class name)."""
  return [type(spec).__module__.split('.')[0], type(spec).__name__]


def _flatten(structure):
  if isinstance(structure, dict):
    return [leaf for key in sorted(structure) for leaf in
            _flatten(structure[key])]
  if isinstance(structure, (list, tuple)):
    return [leaf for item in structure for leaf in _flatten(item)]
  return [structure]


def _table(reverb, name='t', signature=None):
  return reverb.Table(name, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                      10, reverb.rate_limiters.MinSize(1), signature=signature)


def scenario_infer_signature_of_numpy_steps_is_tensorflows(reverb, env):
  sw = reverb.structured_writer
  step = {'a': np.zeros((), np.int32), 'b': np.zeros((3,), np.float32)}
  ref = sw.create_reference_step(step)
  signature = sw.infer_signature(
      [sw.create_config({'x': ref['a'][-2:], 'y': ref['b'][-1]}, 't'),
       sw.create_config({'x': ref['a'][-3:], 'y': ref['b'][-1]}, 't')], step)
  tf = env.tf
  return [[_kind(s) for s in _flatten(signature)],
          signature == {'x': tf.TensorSpec([None], tf.int32, 'x'),
                        'y': tf.TensorSpec([3], tf.float32, 'y')},
          signature['x'].is_compatible_with(tf.zeros([5], tf.int32)),
          signature['y'].is_compatible_with(tf.TensorSpec([3], tf.float32)),
          signature['y'].is_compatible_with(tf.zeros([2], tf.float32))]


def scenario_infer_signature_of_tensorflow_steps(reverb, env):
  """As Acme's structured adders build their table signature."""
  tf = env.tf
  sw = reverb.structured_writer
  step_spec = Step(tf.TensorSpec([4], tf.float32, 'obs'),
                   tf.TensorSpec([], tf.int64),
                   {'logits': tf.TensorSpec([2], tf.float32)})
  pattern = sw.pattern_from_transform(
      step_spec, lambda step: Step(step.observation[-3:], step.action[-2],
                                   {'logits': step.extras['logits'][-1]}))
  signature = sw.infer_signature([sw.create_config(pattern, 't')], step_spec)
  expected = Step(tf.TensorSpec([3, 4], tf.float32, 'observation'),
                  tf.TensorSpec([], tf.int64, 'action'),
                  {'logits': tf.TensorSpec([2], tf.float32, 'extras/logits')})
  table = _table(reverb, signature=signature)
  client = reverb.Client(env.server([table]))
  served = client.server_info()['t'].signature
  return [[_kind(s) for s in _flatten(signature)],
          type(signature).__name__, signature == expected,
          table.info.signature == expected, served == expected,
          [_kind(s) for s in _flatten(served)], type(served).__name__,
          list(served._fields)]


def scenario_infer_signature_errors_of_tensorflow_steps(reverb, env):
  tf = env.tf
  sw = reverb.structured_writer
  step_spec = {'a': tf.TensorSpec([None, 3], tf.int32),
               'b': tf.TensorSpec([None, 4], tf.float32)}
  ref = sw.create_reference_step(step_spec)
  outcomes = []
  for nodes in ((ref['a'][-1], ref['b'][-1]), (ref['a'][-1], ref['a'][-2:])):
    try:
      sw.infer_signature([sw.create_config(n, 't') for n in nodes], step_spec)
    except ValueError as e:
      outcomes.append(str(e))
  return outcomes


def scenario_server_info_signatures_are_tensorflows(reverb, env):
  tf = env.tf
  signature = {
      'obs': tf.TensorSpec([None, 2], tf.float32, 'obs'),
      'action': tf.TensorSpec([], tf.int64),
      'nested': [tf.TensorSpec([3], tf.uint8, 'n0'),
                 (tf.TensorSpec(None, tf.string),)],
  }
  client = reverb.Client(env.server([
      _table(reverb, 'signed', signature), _table(reverb, 'unsigned')]))
  infos = client.server_info()
  served = infos['signed'].signature
  return [[_kind(s) for s in _flatten(served)], served == signature,
          type(served['nested']).__name__,
          type(served['nested'][1]).__name__,
          infos['unsigned'].signature,
          served['obs'].is_compatible_with(tf.zeros([7, 2]))]


def scenario_from_table_signature_of_a_missing_table(reverb, env):
  address = env.server([_table(reverb, 'c'), _table(reverb, 'a'),
                        _table(reverb, 'b')])
  reverb.TrajectoryDataset.from_table_signature(address, 'nope', 10)


def scenario_from_table_signature_of_a_table_without_signature(reverb, env):
  address = env.server([_table(reverb, 'a')])
  reverb.TrajectoryDataset.from_table_signature(address, 'a', 10)


def scenario_timestep_from_table_signature_errors(reverb, env):
  address = env.server([_table(reverb, 'b'), _table(reverb, 'a'),
                        _table(reverb, 'empty', signature={})])
  outcomes = []
  for table in ('nope', 'a', 'empty'):
    try:
      reverb.TimestepDataset.from_table_signature(address, table, 10)
    except ValueError as e:
      outcomes.append(str(e))
  return outcomes


def _argument_errors(reverb, env, dataset_class):
  tf = env.tf
  address = env.server([_table(reverb, 't')])
  outcomes = []
  for kwargs in [dict(max_in_flight_samples_per_worker=0),
                 dict(max_in_flight_samples_per_worker=-3),
                 dict(num_workers_per_iterator=0),
                 dict(num_workers_per_iterator=-2),
                 dict(max_samples_per_stream=0),
                 dict(max_samples_per_stream=-5),
                 dict(rate_limiter_timeout_ms=-2),
                 dict(rate_limiter_timeout_ms=-2.5),
                 dict(max_samples=0),
                 dict(max_samples=-7)]:
    try:
      dataset_class(address, 't', dtypes={'x': tf.float32},
                    shapes={'x': tf.TensorShape([2])},
                    **dict(dict(max_in_flight_samples_per_worker=10), **kwargs))
      outcomes.append('made')
    except ValueError as e:
      outcomes.append(str(e))
  return outcomes


def scenario_trajectory_dataset_argument_errors(reverb, env):
  return _argument_errors(reverb, env, reverb.TrajectoryDataset)


def scenario_timestep_dataset_argument_errors(reverb, env):
  return _argument_errors(reverb, env, reverb.TimestepDataset)


def scenario_structured_writer_items_are_not_checked_against_signatures(
    reverb, env):
  tf = env.tf
  sw = reverb.structured_writer
  ref = sw.create_reference_step({'a': None, 'b': None})
  table = reverb.Table.queue('q', 10, signature=tf.TensorSpec([2], tf.float32))
  client = reverb.Client(env.server([table]))
  writer = client.structured_writer([sw.create_config(ref['a'][-1], 'q')])
  writer.append({'a': np.int32(3), 'b': None})
  writer.flush()
  return [s.data for s in client.sample('q', 1, emit_timesteps=False)]


def scenario_structured_adder_round_trip(reverb, env):
  """As Acme's structured sequence adder: the table signature comes from
  infer_signature, items from a StructuredWriter, samples from
  TrajectoryDataset.from_table_signature."""
  tf = env.tf
  sw = reverb.structured_writer
  step_spec = Step(tf.TensorSpec([2], tf.float32), tf.TensorSpec([], tf.int32),
                   {'start': tf.TensorSpec([], tf.bool)})
  ref = sw.create_reference_step(step_spec)
  pattern = Step(ref.observation[-3:], ref.action[-3:],
                 {'start': ref.extras['start'][-3:]})
  configs = [sw.create_config(pattern, 't', [
      sw.Condition.step_index() >= 2,
      sw.Condition.steps_since_applied() >= 2,
  ])]
  signature = sw.infer_signature(configs, step_spec)
  table = reverb.Table.queue('t', 100, signature=signature)
  address = env.server([table])
  writer = reverb.Client(address).structured_writer(configs)
  for t in range(7):
    writer.append(Step(np.full([2], t, np.float32), np.int32(t),
                       {'start': np.bool_(t == 0)}))
  writer.end_episode()
  dataset = reverb.TrajectoryDataset.from_table_signature(address, 't', 10)
  samples = [s.data for s in dataset.take(3)]
  compatible = [all(spec.is_compatible_with(value) for spec, value in zip(
      _flatten(signature), _flatten(sample))) for sample in samples]
  return [compatible, [[v.numpy().tolist() for v in _flatten(s)]
                       for s in samples],
          str(dataset.element_spec.data)]
