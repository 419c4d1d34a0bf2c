"""StructuredWriter: patterns, conditions, priorities, signatures."""

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


def test_td_error_priority(client):
  writer = client.structured_writer([
      sw.create_config(
          REF['b'][-3:], 'prioritized',
          priority=sw.td_error(0.75, STEP, lambda step: step['b'])),
  ])
  for td in (1.0, -3.0, 2.0):
    writer.append({'a': np.int32(0), 'b': np.float32(td)})
  writer.flush(timeout_ms=TIMEOUT * 1000)
  sample = next(client.sample('prioritized', emit_timesteps=False,
                              timeout=TIMEOUT))
  assert sample.info.priority == pytest.approx(0.75 * 3 + 0.25 * 2)


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
  with pytest.raises(ValueError, match='length'):
    writer.append({'a': np.int32(2)})
  writer.flush(timeout_ms=TIMEOUT * 1000)
  assert len(drain(client)) == 2


@pytest.mark.parametrize('node', [
    dict(flat_source_index=-1, stop=-1),
    dict(flat_source_index=0),
    dict(flat_source_index=0, start=0),
    dict(flat_source_index=0, stop=1),
    dict(flat_source_index=0, start=-2, stop=-2),
    dict(flat_source_index=0, stop=0),
    dict(flat_source_index=0, stop=-1, step=1),
    dict(flat_source_index=0, start=-2, step=0),
])
def test_invalid_pattern_nodes(client, node):
  config = sw.Config(flat=[sw.patterns_pb2.PatternNode(**node)], table='queue')
  with pytest.raises(ValueError, match='PatternNode'):
    client.structured_writer([config])


@pytest.mark.parametrize('condition', [
    sw.ConditionProto(eq=1),
    sw.ConditionProto(step_index=True),
    sw.ConditionProto(step_index=True, mod_eq={'mod': 0, 'eq': 0}),
    sw.ConditionProto(step_index=True, mod_eq={'mod': 2, 'eq': -1}),
    sw.ConditionProto(is_end_episode=True, eq=0),
    sw.ConditionProto(is_end_episode=True, eq=1, inverse=True),
])
def test_invalid_conditions(client, condition):
  config = sw.create_config(REF['a'][-1], 'queue', [condition])
  with pytest.raises(ValueError, match='Condition'):
    client.structured_writer([config])


def test_no_configs(client):
  with pytest.raises(ValueError):
    client.structured_writer([])


def test_pattern_beyond_the_step(client):
  config = sw.create_config(sw.create_reference_step([None] * 3)[2][-1],
                            'queue')
  writer = client.structured_writer([config])
  with pytest.raises(ValueError, match='field'):
    writer.append([np.int32(0)])


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


STEP_SPEC = {'a': specs.TensorSpec([], np.int32),
             'b': specs.TensorSpec([3], np.float32)}


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
  strided = sw.infer_signature([sw.create_config(REF['b'][-5::2], 't')],
                               STEP_SPEC)
  assert strided.shape == (3, 3)


@pytest.mark.parametrize('configs, message', [
    ([], 'At least one'),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config([REF['a'][-1]], 't')], 'pattern_structure'),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config(REF['a'][-1], 'u')], 'same table'),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config(REF['b'][-1], 't')], 'dtypes'),
    ([sw.create_config(REF['a'][-1], 't'),
      sw.create_config(REF['a'][-2:], 't')], 'shapes'),
])
def test_infer_signature_errors(configs, message):
  with pytest.raises(ValueError, match=message):
    sw.infer_signature(configs, STEP_SPEC)
