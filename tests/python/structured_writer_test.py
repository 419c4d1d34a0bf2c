"""StructuredWriter: patterns, conditions, priorities, signatures."""

import re

import numpy as np
import pytest

import reverb
from reverb import specs
from reverb import structured_writer as sw

TIMEOUT = 30
STEP = {'a': None, 'b': None}
REF = sw.create_reference_step(STEP)


@pytest.fixture(name='client')
def client_fixture():
  server = reverb.Server([
      reverb.Table.queue('queue', 1000),
      reverb.Table('prioritized', reverb.selectors.Prioritized(1.0),
                   reverb.selectors.Fifo(), 100,
                   reverb.rate_limiters.MinSize(1)),
  ])
  yield server.localhost_client()
  server.stop()


def drain(client, table='queue'):
  n = client.server_info()[table].current_size
  if not n:
    return []
  return [s.data for s in client.sample(table, num_samples=n,
                                        emit_timesteps=False, timeout=TIMEOUT)]


def write(client, configs, steps=10, end_episode=True):
  writer = client.structured_writer(configs)
  for t in range(steps):
    writer.append({'a': np.int32(t), 'b': np.float32(t) / 2})
  if end_episode:
    writer.end_episode(timeout_ms=TIMEOUT * 1000)
  else:
    writer.flush(timeout_ms=TIMEOUT * 1000)
  return writer


@pytest.mark.parametrize('condition, expected', [
    (sw.Condition.step_index() % 3 == 0, [0, 3, 6, 9]),
    (sw.Condition.steps_since_applied() >= 4, [3, 7]),
    (sw.Condition.step_index() >= 7, [7, 8, 9]),
    (sw.Condition.step_index() > 7, [8, 9]),
    (sw.Condition.step_index() < 2, [0, 1]),
    (sw.Condition.step_index() <= 1, [0, 1]),
    (sw.Condition.step_index() != 1, [0, 2, 3, 4, 5, 6, 7, 8, 9]),
    (sw.Condition.step_index() == 4, [4]),
])
def test_conditions_choose_the_steps(client, condition, expected):
  write(client, [sw.create_config(REF['a'][-1], 'queue', [condition])])
  assert [int(d[0]) for d in drain(client)] == expected


def test_steps_since_applied_keeps_counting_across_episodes(client):
  writer = client.structured_writer([sw.create_config(
      REF['a'][-1], 'queue', [sw.Condition.steps_since_applied() >= 3])])
  for episode in range(3):
    for t in range(4):
      writer.append({'a': np.int32(10 * episode + t), 'b': None})
    writer.end_episode(clear_buffers=episode != 1,
                       timeout_ms=TIMEOUT * 1000)
  assert [int(d[0]) for d in drain(client)] == [2, 11, 20, 23]


def test_an_inverted_buffer_length_condition_is_no_history_guard(client):
  # buffer_length < 4 always holds; the items still wait for 3 steps.
  condition = sw.ConditionProto(buffer_length=True, ge=4, inverse=True)
  write(client, [sw.create_config(REF['a'][-3:], 'queue', [condition])],
        steps=4)
  assert [list(d[0]) for d in drain(client)] == [[0, 1, 2], [1, 2, 3]]


def test_end_of_episode_condition(client):
  write(client, [sw.create_config(REF['a'][-1], 'queue',
                                  [sw.Condition.is_end_episode()])], steps=5)
  assert [int(d[0]) for d in drain(client)] == [4]


def test_strided_slices(client):
  write(client, [sw.create_config(REF['a'][-5::2], 'queue')])
  items = [list(d[0]) for d in drain(client)]
  assert items == [[t, t + 2, t + 4] for t in range(6)]


def test_nested_patterns_and_data_conditions(client):
  data = sw.Condition.data({'a': None, 'b': None})
  pattern = sw.pattern_from_transform(
      STEP, lambda step: {'first': step['a'][-2], 'pair': step['b'][-2:]})
  config = sw.create_config(pattern, 'queue', [data['a'] % 2 == 1])
  write(client, [config], steps=6)
  items = drain(client)
  assert [(int(d[0]), list(d[1])) for d in items] == [
      (t - 1, [(t - 1) / 2, t / 2]) for t in (1, 3, 5)]


def priority_of_one_item(client, config, steps):
  writer = client.structured_writer([config])
  for step in steps:
    writer.append(step)
  writer.flush(timeout_ms=TIMEOUT * 1000)
  sample = next(client.sample('prioritized', emit_timesteps=False,
                              timeout=TIMEOUT))
  return sample.info.priority


def td_steps(*values):
  return [{'a': np.int32(0), 'b': v} for v in values]


def test_td_error_priority(client):
  config = sw.create_config(
      REF['b'][-3:], 'prioritized',
      priority=sw.td_error(0.75, STEP, lambda step: step['b']))
  priority = priority_of_one_item(client, config, td_steps(
      np.float32(1.0), np.float32(-3.0), np.float32(2.0)))
  assert priority == pytest.approx(0.75 * 3 + 0.25 * 2)


def test_td_error_reads_the_fields_last_node(client):
  config = sw.create_config(
      {'x': REF['b'][-1], 'y': REF['b'][-3:]}, 'prioritized',
      priority=sw.td_error(0.25, STEP, lambda step: step['b']))
  priority = priority_of_one_item(client, config, td_steps(
      np.int64(1), np.int64(-4), np.int64(2)))
  assert priority == pytest.approx(0.25 * 4 + 0.75 * 7 / 3)


def test_td_error_of_a_field_outside_the_pattern_is_zero(client):
  config = sw.create_config(
      REF['a'][-1], 'prioritized',
      priority=sw.td_error(0.5, STEP, lambda step: step['b']))
  assert priority_of_one_item(client, config, td_steps(np.float32(3))) == 0


@pytest.mark.parametrize('value, message', [
    (np.bool_(True), 'TD Error expects a double/float/int tensor and it is 10'),
    (np.float16(1), 'TD Error expects a double/float/int tensor and it is 19'),
    (np.zeros(2, np.int8),
     'TD Error expects a double/float/int tensor and it is 6'),
    (np.zeros(2, np.float32), 'TD Error expects a scalar tensor'),
])
def test_td_error_of_other_values(client, value, message):
  writer = client.structured_writer([sw.create_config(
      REF['b'][-1], 'prioritized',
      priority=sw.td_error(0.5, STEP, lambda step: step['b']))])
  with pytest.raises(ValueError) as e:
    writer.append({'a': np.int32(0), 'b': value})
  assert str(e.value) == message


def test_config_without_priority_fails_when_it_applies(client):
  writer = client.structured_writer([sw.Config(
      flat=[REF['a'][-1]], table='prioritized')])
  with pytest.raises(ValueError, match='The Priority function undefined'):
    writer.append({'a': np.int32(0), 'b': None})


def test_partial_steps_and_missing_cells(client):
  writer = client.structured_writer(
      [sw.create_config({'a': REF['a'][-1], 'b': REF['b'][-1]}, 'queue')])
  writer.append({'a': np.int32(1), 'b': None}, partial_step=True)
  assert writer.step_is_open
  writer.flush(timeout_ms=TIMEOUT * 1000)
  assert not drain(client)  # 'b' is missing: no item yet.
  writer.append({'a': None, 'b': np.float32(2)})
  assert not writer.step_is_open
  writer.flush(timeout_ms=TIMEOUT * 1000)
  [item] = drain(client)
  assert (int(item[0]), float(item[1])) == (1, 2.0)


def test_unreferenced_fields_are_not_written(client):
  writer = client.structured_writer([sw.create_config(REF['a'][-1], 'queue')])
  writer.append({'a': np.int32(0), 'b': np.float32(0)})
  # 'b' changes dtype: an error if it were written.
  writer.append({'a': np.int32(1), 'b': 'text'})
  # ... and may be given twice in a step.
  writer.append({'a': None, 'b': np.float32(0)}, partial_step=True)
  writer.append({'a': np.int32(2), 'b': np.float32(0)})
  writer.flush(timeout_ms=TIMEOUT * 1000)
  assert len(drain(client)) == 3


@pytest.mark.parametrize('node, message', [
    (dict(flat_source_index=-1, stop=-1),
     '`flat_source_index` must be >= 0 but got -1.'),
    (dict(flat_source_index=0, step=1),
     'At least one of `start` and `stop` must be specified.'),
    (dict(flat_source_index=0, start=0, step=0), '`start` must be < 0 but got 0.'),
    (dict(flat_source_index=0, start=-1, stop=1),
     '`stop` must be <= 0 but got 1.'),
    (dict(flat_source_index=0, start=-1, stop=-3, step=0),
     '`stop` (-3) must be > `start` (-1) when both are specified.'),
    (dict(flat_source_index=0, stop=0),
     "`stop` must be < 0 when `start` isn't set but got 0."),
    (dict(flat_source_index=0, stop=-1, step=1),
     '`step` must only be set when `start` is set.'),
    (dict(flat_source_index=0, start=-2, step=-1),
     '`step` must be > 0 but got -1.'),
])
def test_invalid_pattern_nodes(client, node, message):
  config = sw.Config(flat=[sw.patterns_pb2.PatternNode(**node)], table='queue')
  with pytest.raises(ValueError) as e:
    client.structured_writer([config])
  assert str(e.value) == f'Invalid configuration at position 0: {message}'


@pytest.mark.parametrize('condition, message', [
    (sw.ConditionProto(eq=1), 'Conditions must specify a value for `left`.'),
    (sw.ConditionProto(step_index=True),
     'Conditions must specify a value for `cmp`.'),
    (sw.ConditionProto(step_index=True, mod_eq={'mod': 0, 'eq': -1}),
     '`mod_eq.mod` must be > 0 but got 0.'),
    (sw.ConditionProto(step_index=True, mod_eq={'mod': 2, 'eq': -1}),
     '`mod_eq.eq` must be >= 0 but got -1.'),
    (sw.ConditionProto(is_end_episode=True, eq=0),
     'Condition must use `eq=1` when using `is_end_episode`.'),
    (sw.ConditionProto(is_end_episode=True, eq=1, inverse=True),
     'Condition must use `eq=1` when using `is_end_episode`.'),
    (sw.ConditionProto(flat_source_index=-1, eq=1),
     'flat_source_index must be >= 0 but got -1.'),
])
def test_invalid_conditions(client, condition, message):
  config = sw.create_config(REF['a'][-1], 'queue', [condition])
  with pytest.raises(ValueError) as e:
    client.structured_writer([config])
  assert str(e.value) == f'Invalid configuration at position 0: {message}'


def test_invalid_config_is_named_by_position(client):
  good = sw.create_config(REF['a'][-1], 'queue')
  with pytest.raises(ValueError) as e:
    client.structured_writer([good, sw.Config(flat=good.flat)])
  assert str(e.value) == (
      'Invalid configuration at position 1: `table` must not be empty.')
  with pytest.raises(ValueError, match='`flat` must not be empty'):
    client.structured_writer([sw.Config(table='queue')])


def test_no_configs(client):
  with pytest.raises(ValueError, match='At least one config'):
    client.structured_writer([])


def test_pattern_beyond_the_step_never_applies(client):
  ref = sw.create_reference_step([None] * 3)
  writer = client.structured_writer([
      sw.create_config([ref[0][-1], ref[2][-1]], 'queue'),
      sw.create_config(ref[0][-1], 'queue'),
      sw.create_config(ref[0][-1], 'queue',
                       [sw.ConditionProto(flat_source_index=2, eq=0,
                                          inverse=True)]),
  ])
  for t in range(3):
    writer.append([np.int32(t)])
  writer.flush(timeout_ms=TIMEOUT * 1000)
  assert [int(d[0]) for d in drain(client)] == [0, 1, 2]


def test_data_conditions_compare_bools_and_ints(client):
  step = {'a': None, 'done': None, 'n': None}
  data = sw.Condition.data(step)
  ref = sw.create_reference_step(step)
  writer = client.structured_writer([
      sw.create_config(ref['a'][-1], 'queue',
                       [data['done'] == True, data['n'] >= 2]),  # pylint: disable=g-explicit-bool-comparison,singleton-comparison
  ])
  for t in range(6):
    writer.append({'a': np.int32(t), 'done': np.bool_(t % 2),
                   'n': np.uint8(t)})
  writer.append({'a': np.int32(6), 'done': None, 'n': np.uint8(6)})
  writer.flush(timeout_ms=TIMEOUT * 1000)
  assert [int(d[0]) for d in drain(client)] == [3, 5]  # None: false.


def test_data_conditions_on_floats_and_vectors_never_hold(client):
  step = {'a': None, 'f': None, 'v': None}
  data = sw.Condition.data(step)
  ref = sw.create_reference_step(step)
  writer = client.structured_writer([
      sw.create_config(ref['a'][-1], 'queue', [data['f'] == 1]),
      sw.create_config(ref['a'][-1], 'queue', [data['v'] != 1]),
  ])
  writer.append({'a': np.int32(0), 'f': np.float32(1), 'v': np.ones(2, int)})
  writer.flush(timeout_ms=TIMEOUT * 1000)
  assert not drain(client)


def test_step_of_another_length(client):
  writer = client.structured_writer([sw.create_config(REF['a'][-1], 'queue')])
  writer.append({'a': np.int32(0), 'b': np.float32(0)})
  with pytest.raises(ValueError) as e:
    writer.append({'a': np.int32(0), 'b': {'c': 1, 'd': 2}})
  assert str(e.value) == (
      'Flattened data has an unexpected length, got 3 but wanted 2.')


def test_append_errors_name_the_column_and_its_path(client):
  step = {'a': None, 'b': {'c': None, 'd': [None, None]}}
  ref = sw.create_reference_step(step)
  writer = client.structured_writer([sw.create_config(
      {'c': ref['b']['c'][-1], 'd': ref['b']['d'][1][-1]}, 'queue')])
  writer.append({'a': 0, 'b': {'c': np.float64(1), 'd': [0, np.float32(1)]}})
  with pytest.raises(ValueError) as e:
    writer.append({'a': 0, 'b': {'c': np.float64(1),
                                 'd': [0, np.zeros(2, np.float32)]}})
  assert str(e.value) == (
      "Tensor of incompatible shape provided for column 3 (path=('b', 'd', "
      "1)). Got [2] which is incompatible with [].")
  with pytest.raises(ValueError) as e:
    writer.append({'a': 0, 'b': {'c': np.int64(1), 'd': [0, np.float32(1)]}})
  assert str(e.value) == (
      "Tensor of wrong dtype provided for column 1 (path=('b', 'c')). Got "
      "int64 but expected double.")


def test_a_field_given_twice_in_a_step(client):
  writer = client.structured_writer(
      [sw.create_config({'a': REF['a'][-1], 'b': REF['b'][-1]}, 'queue')])
  writer.append({'a': np.int32(1), 'b': None}, partial_step=True)
  with pytest.raises(RuntimeError, match='A value for column 0 was provided '
                     'by multiple Append/AppendPartial calls in the same step'):
    writer.append({'a': np.int32(2), 'b': np.float32(3)})
  assert writer.step_is_open  # Nothing of the failed call was appended.
  writer.append({'a': None, 'b': np.float32(3)})
  writer.flush(timeout_ms=TIMEOUT * 1000)
  [item] = drain(client)
  assert (int(item[0]), float(item[1])) == (1, 3.0)


def test_flush_arguments_and_timeouts():
  server = reverb.Server([reverb.Table.queue('full', 1)])
  try:
    writer = server.localhost_client().structured_writer(
        [sw.create_config(REF['a'][-1], 'full')])
    with pytest.raises(ValueError, match='block_until_num_items must be >= 0, '
                       'got -1'):
      writer.flush(-1)
    for t in range(2):  # The second item waits for room that never comes.
      writer.append({'a': np.int32(t), 'b': None})
    with pytest.raises(reverb.DeadlineExceededError) as e:
      writer.flush(timeout_ms=100)
    assert str(e.value) == ('Flush call did not complete within provided '
                            'timeout of 0:00:00.100000')
    with pytest.raises(reverb.DeadlineExceededError) as e:
      writer.flush(timeout_ms=0)  # Gives up at once, as dm-reverb's.
    assert str(e.value) == ('Flush call did not complete within provided '
                            'timeout of 0:00:00')
    with pytest.raises(reverb.DeadlineExceededError) as e:
      writer.end_episode(timeout_ms=50)
    assert str(e.value) == ('End episode call did not complete within '
                            'provided timeout of 0:00:00.050000')
  finally:
    server.stop()


def test_condition_builders_make_protos():
  assert (sw.Condition.step_index() % 4 == 1) == sw.ConditionProto(
      step_index=True, mod_eq={'mod': 4, 'eq': 1})
  assert (sw.Condition.steps_since_applied() > 2) == sw.ConditionProto(
      steps_since_applied=True, ge=3)
  assert (sw.Condition.step_index() <= 2) == sw.ConditionProto(
      step_index=True, ge=3, inverse=True)
  assert REF['a'][-3:] == sw.patterns_pb2.PatternNode(
      flat_source_index=0, start=-3)
  assert REF['b'][-2] == sw.patterns_pb2.PatternNode(
      flat_source_index=1, stop=-2)
  config = sw.create_config({'x': REF['a'][-2:], 'y': [REF['b'][-1]]}, 't')
  assert sw.unpack_pattern(config) == {'x': REF['a'][-2:],
                                       'y': [REF['b'][-1]]}
  assert config.priority == sw.constant_priority_fn(1.0)
  assert reverb.structured is sw


def test_reference_step_keys():
  assert REF['a'][np.int64(-2)] == REF['a'][-2]
  with pytest.raises(ValueError) as e:
    REF['a']['x']  # pylint: disable=pointless-statement
  assert str(e.value) == ("Key must be int or slice by got x (type "
                          "<class 'str'>).")


@pytest.mark.parametrize('value, expected', [
    (True, 1), (False, 0), (np.bool_(True), 1), (np.int64(3), 3)])
def test_condition_builders_take_bools_and_numpy_ints(value, expected):
  data = sw.Condition.data({'a': None})['a']
  assert (data == value) == sw.ConditionProto(flat_source_index=0,
                                              eq=expected)
  assert (data >= value) == sw.ConditionProto(flat_source_index=0,
                                              ge=expected)
  assert (data % 7 == value).mod_eq.eq == expected
  assert (sw.Condition.step_index() != value) == sw.ConditionProto(
      step_index=True, eq=expected, inverse=True)


@pytest.mark.parametrize('value', [1.5, np.float32(2), 'x', None])
def test_condition_builders_refuse_other_values(value):
  with pytest.raises(TypeError):
    sw.Condition.step_index() == value  # pylint: disable=expression-not-assigned


STEP_SPEC = {'a': specs.TensorSpec([], np.int32),
             'b': specs.TensorSpec([3], np.float32)}


@pytest.mark.usefixtures('without_tensorflow_specs')
def test_infer_signature():
  configs = [
      sw.create_config({'x': REF['a'][-2:], 'y': REF['b'][-1]}, 't'),
      sw.create_config({'x': REF['a'][-3:], 'y': REF['b'][-2]}, 't'),
  ]
  signature = sw.infer_signature(configs, STEP_SPEC)
  assert signature == {
      'x': specs.TensorSpec([None], np.int32, 'x'),
      'y': specs.TensorSpec([3], np.float32, 'y'),
  }
  # Strided slices round up, as the items do.
  strided = sw.infer_signature([sw.create_config(REF['b'][-5::2], 't')],
                               STEP_SPEC)
  assert strided.shape == (3, 3)
  # Any leaves with a shape and a dtype describe the steps.
  arrays = {'a': np.zeros((), np.int32), 'b': np.zeros(3, np.float32)}
  assert sw.infer_signature(configs, arrays) == signature


@pytest.mark.parametrize('configs, message', [
    ([], 'At least one'),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config([REF['a'][-1]], 't')], 'pattern_structure'),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config(REF['a'][-1], 'u')], 'same table'),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config(REF['b'][-1], 't')],
     re.escape("multiple dtypes at (). Got [dtype('int32'), "
               "dtype('float32')].")),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config(REF['a'][-2:], 't')],
     re.escape('incompatible shapes at (). Got [TensorShape([]), '
               'TensorShape([2])].')),
])
def test_infer_signature_errors(configs, message):
  with pytest.raises(ValueError, match=message):
    sw.infer_signature(configs, STEP_SPEC)
