"""Differential scenarios: reverb.structured_writer (configs, conditions,
priorities, the errors of Client.structured_writer and StructuredWriter, and
infer_signature read through shapes, dtype names and spec names)."""

import numpy as np

STEP = {'a': None, 'b': None}
NESTED = {'a': None, 'b': {'c': None, 'd': [None, None]}}


def _server(reverb, env, max_size=100):
  """A server with table 'p': items in insertion order, each sampled once."""
  table = reverb.Table('p', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                       max_size, reverb.rate_limiters.MinSize(1),
                       max_times_sampled=1)
  return reverb.Client(env.server([table]))


_END = 'end of the items'


def _drain(client):
  """(priority, data) of every item of 'p', oldest first: samples up to an
  item inserted last (dm-reverb confirms items before its table worker has
  applied them, so the table's size may still be the old one)."""
  client.insert([np.array(_END, dtype=object)], priorities={'p': 1.0})
  items = []
  while True:
    sample = next(client.sample('p', 1, emit_timesteps=False))
    data = sample.data
    if len(data) == 1 and data[0].dtype == object and data[0] == _END.encode():
      return items
    items.append([sample.info.priority, data])


def _write(client, configs, steps, end_episode=False):
  writer = client.structured_writer(configs)
  for step in steps:
    writer.append(step)
  if end_episode:
    writer.end_episode()
  else:
    writer.flush()
  return _drain(client)


def _errors(*calls):
  """[exception class name, message] of each call that raises (else its
  result)."""
  outcomes = []
  for call in calls:
    try:
      outcomes.append(['returned', repr(call())])
    except Exception as e:  # pylint: disable=broad-except
      outcomes.append([type(e).__name__, str(e)])
  return outcomes


def _steps(n):
  return [{'a': np.int32(t), 'b': np.float32(t) / 2} for t in range(n)]


def scenario_conditions_choose_the_steps(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  conditions = [
      sw.Condition.step_index() % 3 == 0,
      sw.Condition.steps_since_applied() >= 4,
      sw.Condition.step_index() > 7,
      sw.Condition.step_index() < 2,
      sw.Condition.step_index() <= 1,
      sw.Condition.step_index() != 1,
      sw.Condition.step_index() == 4,
  ]
  return [_write(client, [sw.create_config(ref['a'][-1], 'p', [c])],
                 _steps(10), end_episode=True) for c in conditions]


def scenario_data_conditions_on_bools_and_ints(reverb, env):
  sw = reverb.structured_writer
  step = {'a': None, 'done': None, 'n': None}
  ref = sw.create_reference_step(step)
  data = sw.Condition.data(step)
  client = _server(reverb, env)
  steps = [{'a': np.int32(t), 'done': np.bool_(t % 2), 'n': np.uint8(t)}
           for t in range(6)]
  conditions = [
      [data['done'] == True],  # pylint: disable=singleton-comparison
      [data['done'] != False],  # pylint: disable=singleton-comparison
      [data['done'] == np.bool_(True), data['n'] >= 3],
      [data['n'] > True],
      [data['n'] % 2 == False],  # pylint: disable=singleton-comparison
      [data['n'] == np.int64(4)],
  ]
  return [_write(client, [sw.create_config(ref['a'][-1], 'p', c)], steps)
          for c in conditions]


def scenario_data_conditions_on_floats_vectors_and_gaps_never_hold(
    reverb, env):
  sw = reverb.structured_writer
  step = {'a': None, 'f': None, 'v': None}
  ref = sw.create_reference_step(step)
  data = sw.Condition.data(step)
  client = _server(reverb, env)
  steps = [{'a': np.int32(0), 'f': np.float32(1), 'v': np.ones(2, np.int64)},
           {'a': np.int32(1), 'f': None, 'v': None}]
  return [
      _write(client, [sw.create_config(ref['a'][-1], 'p', [data['f'] == 1])],
             steps),
      _write(client, [sw.create_config(ref['a'][-1], 'p', [data['v'] != 1])],
             steps),
  ]


def scenario_condition_builders_make_protos(reverb, env):
  del env
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  sw = reverb.structured_writer
  data = sw.Condition.data({'x': None})['x']
  conditions = [
      sw.Condition.step_index() % 4 == 1, sw.Condition.steps_since_applied() > 2,
      sw.Condition.step_index() <= 2, sw.Condition.step_index() < 2,
      sw.Condition.step_index() != True, sw.Condition.is_end_episode(),  # pylint: disable=singleton-comparison
      data == True, data == False, data >= np.bool_(True), data % True == 0,  # pylint: disable=singleton-comparison
      data == np.int32(3), data > np.int64(2),
  ]
  return [json_format.MessageToDict(c) for c in conditions]


def scenario_condition_builders_refuse_other_values(reverb, env):
  del env
  sw = reverb.structured_writer
  data = sw.Condition.data({'x': None})['x']
  return _errors(lambda: data == 1.0, lambda: data == np.float32(3),
                 lambda: data >= 1.5, lambda: data == 'x',
                 lambda: data == None, lambda: data == 2**40)  # pylint: disable=singleton-comparison


def scenario_patterns_and_strided_slices(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  pattern = sw.pattern_from_transform(
      STEP, lambda step: {'first': step['a'][-2], 'pair': step['b'][-2:]})
  return [
      _write(client, [sw.create_config(ref['a'][-5::2], 'p')], _steps(8)),
      _write(client, [sw.create_config(ref['a'][-6:-1:2], 'p')], _steps(7)),
      _write(client, [sw.create_config(pattern, 'p')], _steps(3)),
  ]


def scenario_end_of_episode_configs(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  writer = client.structured_writer([
      sw.create_config(ref['a'][-2:], 'p', [sw.Condition.is_end_episode()]),
      sw.create_config(ref['a'][-1], 'p', [sw.Condition.step_index() == 1]),
  ])
  for t in range(3):
    writer.append({'a': np.int32(t), 'b': None})
  writer.end_episode()
  writer.end_episode()  # An empty episode makes no items.
  writer.append({'a': np.int32(10), 'b': None})
  writer.end_episode()
  for t in range(2):
    writer.append({'a': np.int32(20 + t), 'b': None})
  writer.end_episode(clear_buffers=False)
  writer.append({'a': np.int32(30), 'b': None})
  writer.end_episode()
  return _drain(client)


def scenario_partial_steps(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  writer = client.structured_writer([
      sw.create_config({'a': ref['a'][-1], 'b': ref['b'][-1]}, 'p'),
      sw.create_config(ref['a'][-1], 'p', [sw.Condition.is_end_episode()]),
  ])
  opened = []
  writer.append({'a': np.int32(1), 'b': None}, partial_step=True)
  opened.append(writer.step_is_open)
  writer.append({'a': None, 'b': np.float32(2)})
  opened.append(writer.step_is_open)
  writer.append({'a': np.int32(3), 'b': None}, partial_step=True)
  writer.end_episode()
  opened.append(writer.step_is_open)
  return [opened, _drain(client)]


def _field_given_twice(reverb, env, again):
  """Gives 'c' in a partial step, then `again` (which has 'c' too), then
  'b' to close the step."""
  sw = reverb.structured_writer
  step = {'a': None, 'b': None, 'c': None}
  ref = sw.create_reference_step(step)
  client = _server(reverb, env)
  writer = client.structured_writer(
      [sw.create_config([ref['b'][-1], ref['c'][-1]], 'p')])
  writer.append({'a': np.int32(0), 'b': None, 'c': np.int32(0)},
                partial_step=True)
  errors = _errors(lambda: writer.append(again))
  opened = writer.step_is_open
  errors += _errors(lambda: writer.append(
      {'a': None, 'b': np.int32(1), 'c': None}))
  writer.flush()
  return [errors, opened, _drain(client)]


def scenario_a_field_given_twice_in_a_step(reverb, env):
  # 'a' is read by no config: giving it again is fine.
  return _field_given_twice(
      reverb, env, {'a': np.int32(0), 'b': None, 'c': np.int32(5)})


def scenario_a_field_given_twice_with_other_fields(reverb, env):
  # dm-reverb keeps 'b' of the failed call (so closing the step with 'b'
  # fails too); here a failed append writes nothing.
  return _field_given_twice(
      reverb, env, {'a': np.int32(0), 'b': np.int32(7), 'c': np.int32(5)})


def scenario_append_of_a_wrong_shape(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(NESTED)
  client = _server(reverb, env)
  writer = client.structured_writer([sw.create_config(
      {'c': ref['b']['c'][-1], 'd': ref['b']['d'][1][-1]}, 'p')])
  writer.append({'a': 0, 'b': {'c': np.float64(1), 'd': [0, np.float32(1)]}})
  writer.append({'a': 0, 'b': {'c': np.float64(1),
                               'd': [0, np.zeros(2, np.float32)]}})


def scenario_append_of_a_wrong_dtype(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(NESTED)
  client = _server(reverb, env)
  writer = client.structured_writer([sw.create_config(
      {'c': ref['b']['c'][-1], 'd': ref['b']['d'][1][-1]}, 'p')])
  writer.append({'a': 0, 'b': {'c': np.float64(1), 'd': [0, np.float32(1)]}})
  writer.append({'a': 0, 'b': {'c': np.int64(1), 'd': [0, np.float32(1)]}})


def scenario_append_after_a_wrong_dtype_keeps_the_step(reverb, env):
  sw = reverb.structured_writer
  step = {'b': None, 'c': None}
  ref = sw.create_reference_step(step)
  client = _server(reverb, env)
  writer = client.structured_writer(
      [sw.create_config([ref['b'][-1], ref['c'][-1]], 'p')])
  writer.append({'b': np.int32(1), 'c': np.int32(0)})
  writer.append({'b': np.int32(2), 'c': None}, partial_step=True)
  errors = _errors(lambda: writer.append({'b': None, 'c': np.float32(0)}))
  opened = writer.step_is_open
  writer.append({'b': None, 'c': np.int32(3)})
  writer.flush()
  return [errors, opened, _drain(client)]


def scenario_append_of_another_structure(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(NESTED)
  client = _server(reverb, env)
  writer = client.structured_writer([sw.create_config(ref['a'][-1], 'p')])
  writer.append({'a': 0, 'b': {'c': 1.0, 'd': [0, 1.0]}})
  return _errors(lambda: writer.append({'a': 0, 'x': 1}),
                 lambda: writer.append({'a': 0, 'b': {'c': 1, 'd': [0, 1, 2]}}))


def scenario_unreferenced_fields_are_not_written(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  return _write(client, [sw.create_config(ref['a'][-1], 'p')], [
      {'a': np.int32(0), 'b': np.float32(0)},
      {'a': np.int32(1), 'b': 'text'},  # Another dtype: never checked.
      {'a': np.int32(2), 'b': np.zeros(3)},
  ])


def scenario_patterns_beyond_the_step_never_apply(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step([None] * 3)
  client = _server(reverb, env)
  return _write(client, [
      sw.create_config([ref[0][-1], ref[2][-1]], 'p'),
      sw.create_config(ref[0][-1], 'p',
                       [sw.ConditionProto(flat_source_index=10, eq=0,
                                          inverse=True)]),
      sw.create_config(ref[0][-1], 'p'),
  ], [[np.int32(t)] for t in range(3)])


def scenario_invalid_pattern_nodes(reverb, env):
  sw = reverb.structured_writer
  client = _server(reverb, env)
  nodes = [
      dict(flat_source_index=-1, stop=-1), dict(flat_source_index=0),
      dict(flat_source_index=0, step=1), dict(flat_source_index=0, start=0),
      dict(flat_source_index=0, start=0, step=0),
      dict(flat_source_index=0, stop=1), dict(flat_source_index=0, stop=1,
                                              step=2),
      dict(flat_source_index=0, start=-1, stop=1),
      dict(flat_source_index=0, start=-2, stop=-2),
      dict(flat_source_index=0, start=-1, stop=-3, step=0),
      dict(flat_source_index=0, stop=0),
      dict(flat_source_index=0, stop=-1, step=1),
      dict(flat_source_index=0, start=-2, step=0),
      dict(flat_source_index=0, start=-2, step=-1),
  ]
  return _errors(*[
      lambda node=node: client.structured_writer(
          [sw.Config(flat=[sw.patterns_pb2.PatternNode(**node)], table='p')])
      for node in nodes])


def scenario_invalid_conditions(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  conditions = [
      sw.ConditionProto(eq=1), sw.ConditionProto(step_index=True),
      sw.ConditionProto(step_index=True, mod_eq={'mod': 0, 'eq': -1}),
      sw.ConditionProto(step_index=True, mod_eq={'mod': 2, 'eq': -1}),
      sw.ConditionProto(is_end_episode=True, eq=0),
      sw.ConditionProto(is_end_episode=True, eq=1, inverse=True),
      sw.ConditionProto(is_end_episode=True, ge=1),
      sw.ConditionProto(is_end_episode=True, mod_eq={'mod': 1, 'eq': 0}),
      sw.ConditionProto(flat_source_index=-1, eq=1),
  ]
  return _errors(*[
      lambda c=c: client.structured_writer(
          [sw.create_config(ref['a'][-1], 'p', [c])]) and 'made'
      for c in conditions])


def scenario_invalid_configs(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  node = sw.patterns_pb2.PatternNode
  client = _server(reverb, env)
  good = sw.create_config(ref['a'][-1], 'p')
  return _errors(
      lambda: client.structured_writer([]),
      lambda: client.structured_writer([sw.Config()]),
      lambda: client.structured_writer([sw.Config(table='p')]),
      lambda: client.structured_writer(
          [sw.Config(flat=[node(flat_source_index=0)])]),
      lambda: client.structured_writer(
          [good, sw.Config(flat=[node(flat_source_index=0)], table='p')]),
      lambda: client.structured_writer([sw.Config(
          flat=[node(flat_source_index=0)], table='p',
          conditions=[sw.ConditionProto(eq=1)])]),
      lambda: client.structured_writer([sw.create_config(
          ref['a'][-1], 'p', [sw.ConditionProto(buffer_length=True,
                                                ge=-5)])]) and 'made',
  )


def scenario_td_error_priorities(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  td = lambda w: sw.td_error(w, STEP, lambda step: step['b'])
  floats = [{'a': np.int32(0), 'b': np.float32(v)} for v in (1., -4., 2., 7.)]
  ints = [{'a': np.int32(0), 'b': np.int64(v)} for v in (3, -5, 4)]
  return [
      _write(client, [sw.create_config(ref['b'][-3:], 'p', priority=td(0.25))],
             floats),
      # The field's last node in the pattern counts.
      _write(client, [sw.create_config({'x': ref['b'][-1], 'y': ref['b'][-3:]},
                                       'p', priority=td(0.25))], floats),
      _write(client, [sw.create_config({'x': ref['b'][-3:], 'y': ref['b'][-1]},
                                       'p', priority=td(0.25))], floats),
      _write(client, [sw.create_config(ref['b'][-2:], 'p', priority=td(0.5))],
             ints),
      # A td_error field outside the pattern gives priority 0.
      _write(client, [sw.create_config(ref['a'][-2:], 'p', priority=td(0.5))],
             floats),
  ]


def scenario_td_error_of_other_values(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  priority = sw.td_error(0.5, STEP, lambda step: step['b'])

  def append(value):
    writer = client.structured_writer(
        [sw.create_config(ref['b'][-1], 'p', priority=priority)])
    writer.append({'a': np.int32(0), 'b': value})

  return _errors(*[lambda v=v: append(v) for v in [
      np.bool_(True), np.float16(1), np.int16(1), np.int8(1), np.uint8(1),
      np.uint32(1), np.uint64(1), np.complex64(1), np.zeros(2, np.bool_),
      np.zeros(2, np.float32)]])


def scenario_config_without_priority(reverb, env):
  sw = reverb.structured_writer
  client = _server(reverb, env)
  writer = client.structured_writer([sw.Config(
      flat=[sw.patterns_pb2.PatternNode(flat_source_index=0, stop=-1)],
      table='p')])
  writer.append({'a': np.int32(0), 'b': None})


def scenario_flush_arguments_and_timeouts(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env, max_size=1)
  table = reverb.Table.queue('q', 1)
  queue_client = reverb.Client(env.server([table]))
  writer = queue_client.structured_writer(
      [sw.create_config(ref['a'][-1], 'q')])
  for t in range(2):  # The second item waits for room that never comes.
    writer.append({'a': np.int32(t), 'b': None})
  other = client.structured_writer([sw.create_config(ref['a'][-1], 'p')])
  errors = _errors(lambda: other.flush(-1),
                   lambda: writer.flush(timeout_ms=100),
                   lambda: writer.flush(1, timeout_ms=0),
                   lambda: writer.flush(timeout_ms=0),
                   lambda: writer.flush(timeout_ms=-5),
                   lambda: writer.end_episode(timeout_ms=50),
                   lambda: writer.end_episode(timeout_ms=0))
  # Room for the waiting item (dm-reverb's writer would wait for it forever
  # when it is deleted).
  samples = [s.data
             for s in queue_client.sample('q', 2, emit_timesteps=False)]
  writer.flush()
  return [errors, samples]


def scenario_items_for_an_unknown_table(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  writer = client.structured_writer([sw.create_config(ref['a'][-1], 'nope')])
  writer.append({'a': np.int32(0), 'b': None})
  writer.flush()


def _describe(signature, tree_flatten):
  """Shape, dtype name and name of each leaf (TensorFlow's or ours)."""
  described = []
  for spec in tree_flatten(signature):
    shape = spec.shape
    shape = (None if getattr(shape, 'rank', 0) is None else
             [None if d is None else int(d) for d in shape])
    described.append([shape, spec.dtype.name, spec.name])
  return described


def _flatten(structure):
  if isinstance(structure, dict):
    return [leaf for key in sorted(structure) for leaf in
            _flatten(structure[key])]
  if isinstance(structure, (list, tuple)):
    return [leaf for item in structure for leaf in _flatten(item)]
  return [structure]


class _Spec:
  """A spec of neither package: a shape and a numpy dtype (as dm_env's)."""

  def __init__(self, shape, dtype):
    self.shape = shape
    self.dtype = np.dtype(dtype)


def scenario_infer_signature(reverb, env):
  del env
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  configs = [
      sw.create_config({'x': ref['a'][-2:], 'y': [ref['b'][-1]]}, 't'),
      sw.create_config({'x': ref['a'][-3:], 'y': [ref['b'][-2]]}, 't'),
  ]
  arrays = {'a': np.zeros((), np.int32), 'b': np.zeros((3,), np.float32)}
  objects = {'a': _Spec((), np.int32), 'b': _Spec((3,), np.float32)}
  return [
      _describe(sw.infer_signature(configs, arrays), _flatten),
      _describe(sw.infer_signature(configs, objects), _flatten),
      _describe(sw.infer_signature(
          [sw.create_config((ref['b'][-1], {'z': ref['a'][-2:]}), 't')],
          arrays), _flatten),
      _describe(sw.infer_signature([sw.create_config(ref['b'][-1], 't')],
                                   arrays), _flatten),
  ]


def scenario_infer_signature_of_strided_slices(reverb, env):
  del env
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  arrays = {'a': np.zeros((), np.int32), 'b': np.zeros((3,), np.float32)}
  return [_describe(sw.infer_signature([sw.create_config(node, 't')], arrays),
                    _flatten)
          for node in (ref['b'][-5::2], ref['b'][-4::3], ref['b'][-6:-1:2])]


def scenario_infer_signature_errors(reverb, env):
  del env
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  arrays = {'a': np.zeros((), np.int32), 'b': np.zeros((3,), np.float32)}
  wide = {'a': np.zeros((2, 3), np.int32), 'b': np.zeros((2, 4), np.int32)}
  one = lambda *nodes: [sw.create_config(n, 't') for n in nodes]
  return _errors(
      lambda: sw.infer_signature([], arrays),
      lambda: sw.infer_signature(one(ref['a'][-1], [ref['a'][-1]]), arrays),
      lambda: sw.infer_signature(
          [sw.create_config(ref['a'][-1], t) for t in 'tua'], arrays),
      lambda: sw.infer_signature(one(ref['a'][-1], ref['b'][-1]), arrays),
      lambda: sw.infer_signature(one(ref['a'][-1], ref['a'][-2:]), arrays),
      lambda: sw.infer_signature(one(ref['a'][-1], ref['b'][-1]), wide),
      lambda: sw.infer_signature(
          one(sw.create_reference_step([None] * 5)[4][-1]), arrays),
  )


def scenario_buffer_length_conditions(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)

  def buffer_length(ge):
    return sw.ConditionProto(buffer_length=True, ge=ge)

  # (An inverted one, `buffer_length < 4`, is left out: dm-reverb takes it
  # for the history guard and builds items from missing steps, or hangs.)
  return [_write(client, [sw.create_config(ref['a'][-3:], 'p', conditions)],
                 _steps(5))
          for conditions in ([buffer_length(-5)], [buffer_length(1)],
                             [buffer_length(3)], [buffer_length(4)])]


def scenario_steps_since_applied_across_episodes(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  writer = client.structured_writer([sw.create_config(
      ref['a'][-1], 'p', [sw.Condition.steps_since_applied() >= 3])])
  for episode, clear in ((0, True), (1, False), (2, True)):
    for t in range(4):
      writer.append({'a': np.int32(10 * episode + t), 'b': None})
    writer.end_episode(clear_buffers=clear)
  return _drain(client)


def scenario_fresh_writer(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  client = _server(reverb, env)
  writer = client.structured_writer([
      sw.create_config(ref['a'][-1], 'p', [sw.Condition.is_end_episode()])])
  opened = writer.step_is_open
  writer.flush()
  writer.end_episode()
  writer.end_episode(clear_buffers=False, timeout_ms=1000)
  return [opened, writer.step_is_open, _drain(client)]


def scenario_data_condition_on_a_pattern_field(reverb, env):
  sw = reverb.structured_writer
  ref = sw.create_reference_step(STEP)
  data = sw.Condition.data(STEP)
  client = _server(reverb, env)
  return _write(client, [sw.create_config(
      {'a': ref['a'][-2:], 'b': ref['b'][-1]}, 'p', [data['a'] % 2 == 1])],
                _steps(6), end_episode=True)


def scenario_conditions_over_partial_steps(reverb, env):
  sw = reverb.structured_writer
  step = {'a': None, 'b': None, 'done': None}
  ref = sw.create_reference_step(step)
  data = sw.Condition.data(step)
  client = _server(reverb, env)
  writer = client.structured_writer([
      sw.create_config({'a': ref['a'][-1]}, 'p',
                       [sw.Condition.step_index() % 2 == 0]),
      sw.create_config({'b': ref['b'][-1]}, 'p',
                       [sw.Condition.steps_since_applied() >= 2]),
      sw.create_config({'a': ref['a'][-2:], 'b': ref['b'][-1]}, 'p',
                       [data['done'] == True]),  # pylint: disable=singleton-comparison
  ])
  items = []  # Per step: the items after its first, partial, append.
  for t in range(5):
    writer.append({'a': np.int32(t), 'b': None, 'done': None},
                  partial_step=True)
    writer.flush()
    items.append(_drain(client))
    writer.append({'a': None, 'b': np.float32(t), 'done': np.bool_(t % 2)})
  writer.flush()
  return items + [_drain(client)]


def scenario_reference_step_keys(reverb, env):
  del env
  ref = reverb.structured_writer.create_reference_step({'a': None})['a']
  return _errors(lambda: ref['x'], lambda: ref[-1.0], lambda: ref[-1, -2],
                 lambda: ref[-2.0:], lambda: str(ref[-1]), lambda: str(ref[-3:-1]))


def scenario_reference_step_numpy_int_keys(reverb, env):
  # dm-reverb takes only Python ints.
  del env
  ref = reverb.structured_writer.create_reference_step({'a': None})['a']
  return _errors(lambda: ref[np.int64(-1)].stop)


def scenario_infer_signature_of_configs_without_structure(reverb, env):
  # dm-reverb fails inside dm-tree on the bare repeated field.
  del env
  sw = reverb.structured_writer
  node = sw.patterns_pb2.PatternNode
  arrays = {'a': np.zeros((), np.int32), 'b': np.zeros((3,), np.float32)}
  config = sw.Config(flat=[node(flat_source_index=0, start=-2),
                           node(flat_source_index=1, stop=-1)], table='t')
  return _describe(sw.infer_signature([config], arrays), _flatten)
