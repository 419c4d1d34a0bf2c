"""PatternDataset: trajectories built from a dataset of steps by
StructuredWriter configs, with no server.

Steps flow through the same pattern engine as `Client.structured_writer`
(reverb._patterns.Patterns); each item a config would insert is
emitted as an element instead. Eager (TF2) only, as in dm-reverb. Importing
this module imports TensorFlow.
"""

from typing import Any, Callable, Iterator, Sequence

import numpy as np

from reverb import _datasets
from reverb import _patterns
from reverb import _tree
from reverb import replay_sample
from reverb import structured_writer

tf = _datasets.import_tensorflow()


class PatternDataset:
  """A `tf.data.Dataset` of the trajectories `configs` make from the steps
  of `input_dataset` (calling it returns the dataset).

  Args:
    input_dataset: A dataset of steps (flatten datasets of episodes first).
    configs: StructuredWriter configs; all must produce the same structure
      (see `structured_writer.infer_signature`).
    respect_episode_boundaries: Never build trajectories across episodes
      (the history is cleared at each episode end).
    is_end_of_episode: step -> scalar bool tensor, True on an episode's last
      step.

  Raises:
    ValueError: If the configs are invalid or disagree, or
      `is_end_of_episode` does not return a scalar bool.
  """

  def __new__(cls, input_dataset: Any,
              configs: Sequence[structured_writer.Config],
              respect_episode_boundaries: bool,
              is_end_of_episode: Callable[[Any], Any]):
    signature = _datasets.lists_to_tuples(structured_writer.infer_signature(
        configs, input_dataset.element_spec))
    concrete = tf.function(is_end_of_episode).get_concrete_function(
        input_dataset.element_spec)
    output = concrete.structured_outputs
    if not (isinstance(output, tf.Tensor) and output.dtype == tf.bool and
            output.shape.rank == 0):
      raise ValueError(
          f'Invalid `is_end_of_episode`. `is_end_of_episode` must return '
          f'`bool`, but its return type is {output}.')
    configs = [_patterns.validated(config) for config in configs]

    def generate() -> Iterator[Any]:
      patterns = _patterns.Patterns(configs)
      for step in input_dataset:
        values = [np.asarray(t) for t in tf.nest.flatten(step)]
        patterns.check_length(len(values))
        yield from _trajectories(signature, patterns.append(values, values,
                                                            False))
        if bool(is_end_of_episode(step)):
          yield from _trajectories(
              signature, patterns.end_episode(respect_episode_boundaries))

    return tf.data.Dataset.from_generator(generate, output_signature=signature)


def _trajectories(signature: Any, items) -> Iterator[Any]:
  for _, columns, squeeze, _ in items:
    leaves = [cells[0] if squeezed else np.stack(cells)
              for cells, squeezed in zip(columns, squeeze)]
    yield _tree.unflatten_as(signature, leaves)


def pattern_dataset_with_info(
    input_dataset: Any, configs: Sequence[structured_writer.Config],
    respect_episode_boundaries: bool,
    is_end_of_episode: Callable[[Any], Any]) -> Any:
  """A PatternDataset whose elements are ReplaySamples with a zero info."""
  dataset = PatternDataset(input_dataset, configs, respect_episode_boundaries,
                           is_end_of_episode)
  return dataset.map(lambda data: replay_sample.ReplaySample(
      info=replay_sample.SampleInfo.zeros(), data=data))
