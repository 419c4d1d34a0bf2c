"""PatternDataset: StructuredWriter patterns applied to a dataset of steps."""

import numpy as np
import pytest
import tensorflow as tf

import reverb
from reverb import structured_writer as sw

ENDS = np.array([0, 0, 0, 0, 1, 0, 0, 0, 0, 1], bool)


def steps():
  return tf.data.Dataset.from_tensor_slices(
      {'a': np.arange(10, dtype=np.int32), 'end': ENDS})


REF = sw.create_reference_step(steps().element_spec)


def is_end(step):
  return step['end']


@pytest.mark.parametrize('respect, expected', [
    (True, [[0, 1, 2], [1, 2, 3], [2, 3, 4], [5, 6, 7], [6, 7, 8],
            [7, 8, 9]]),
    (False, [[t - 2, t - 1, t] for t in range(2, 10)]),
])
def test_windows_within_or_across_episodes(respect, expected):
  configs = [sw.create_config({'x': REF['a'][-3:]}, 't')]
  dataset = reverb.PatternDataset(steps(), configs, respect, is_end)
  assert dataset.element_spec == {'x': tf.TensorSpec([3], tf.int32, 'x')}
  assert [d['x'].numpy().tolist() for d in dataset] == expected


def test_conditions_and_end_of_episode_configs():
  configs = [
      sw.create_config({'x': REF['a'][-1]}, 't',
                       [sw.Condition.is_end_episode()]),
      sw.create_config({'x': REF['a'][-1]}, 't',
                       [sw.Condition.step_index() == 0]),
  ]
  dataset = reverb.PatternDataset(steps(), configs, True, is_end)
  assert sorted(int(d['x']) for d in dataset) == [0, 4, 5, 9]


def test_with_info():
  configs = [sw.create_config(REF['a'][-2:], 't')]
  dataset = reverb.pattern_dataset.pattern_dataset_with_info(
      steps(), configs, True, is_end)
  first = next(iter(dataset))
  assert isinstance(first, reverb.ReplaySample)
  assert first.data.numpy().tolist() == [0, 1]
  assert int(first.info.key) == 0


def test_errors():
  configs = [sw.create_config(REF['a'][-1], 't')]
  with pytest.raises(ValueError, match='is_end_of_episode'):
    reverb.PatternDataset(steps(), configs, True, lambda step: step['a'])
  with pytest.raises(ValueError, match='same table'):
    reverb.PatternDataset(steps(), configs + [sw.create_config(
        REF['a'][-1], 'u')], True, is_end)
