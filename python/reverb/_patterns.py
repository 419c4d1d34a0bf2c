"""The pattern engine of StructuredWriter and PatternDataset (private).

`validated` checks a config (with dm-reverb's messages) and completes its
conditions; `Patterns` applies configs to a stream of steps and says which
items to create. Building configs and writing them to a server is the
public API of `reverb.structured_writer`.
"""

import collections
import copy
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from reverb import structured_value
from reverb.cc import patterns_pb2

Config = patterns_pb2.StructuredWriterConfig
ConditionProto = patterns_pb2.Condition



def node_age(node: patterns_pb2.PatternNode) -> int:
  """Steps of history a node reaches back."""
  return -node.start if node.HasField('start') else -node.stop


def _node_error(node: patterns_pb2.PatternNode) -> Optional[str]:
  if node.flat_source_index < 0:
    return (f'`flat_source_index` must be >= 0 but got '
            f'{node.flat_source_index}.')
  if not node.HasField('start') and not node.HasField('stop'):
    return 'At least one of `start` and `stop` must be specified.'
  if node.HasField('start') and node.start >= 0:
    return f'`start` must be < 0 but got {node.start}.'
  if node.HasField('stop') and node.stop > 0:
    return f'`stop` must be <= 0 but got {node.stop}.'
  if (node.HasField('start') and node.HasField('stop') and
      node.start >= node.stop):
    return (f'`stop` ({node.stop}) must be > `start` ({node.start}) when both '
            'are specified.')
  if not node.HasField('start') and node.stop >= 0:
    return f"`stop` must be < 0 when `start` isn't set but got {node.stop}."
  if node.HasField('step') and not node.HasField('start'):
    return '`step` must only be set when `start` is set.'
  if node.HasField('step') and node.step <= 0:
    return f'`step` must be > 0 but got {node.step}.'
  return None


def _condition_error(condition: ConditionProto) -> Optional[str]:
  if not condition.WhichOneof('left'):
    return 'Conditions must specify a value for `left`.'
  if not condition.WhichOneof('cmp'):
    return 'Conditions must specify a value for `cmp`.'
  if condition.HasField('mod_eq') and condition.mod_eq.mod <= 0:
    return f'`mod_eq.mod` must be > 0 but got {condition.mod_eq.mod}.'
  if condition.HasField('mod_eq') and condition.mod_eq.eq < 0:
    return f'`mod_eq.eq` must be >= 0 but got {condition.mod_eq.eq}.'
  if condition.is_end_episode and (condition.WhichOneof('cmp') != 'eq' or
                                   condition.eq != 1 or condition.inverse):
    return 'Condition must use `eq=1` when using `is_end_episode`.'
  if (condition.WhichOneof('left') == 'flat_source_index' and
      condition.flat_source_index < 0):
    return (f'flat_source_index must be >= 0 but got '
            f'{condition.flat_source_index}.')
  return None


def _config_error(config: Config) -> Optional[str]:
  if not config.flat:
    return '`flat` must not be empty.'
  if not config.table:
    return '`table` must not be empty.'
  for node in config.flat:
    error = _node_error(node)
    if error:
      return error
  for condition in config.conditions:
    error = _condition_error(condition)
    if error:
      return error
  return None


def validated(config: Config, position: int = 0) -> Config:
  """The config, validated, with a buffer_length condition that ensures
  the history it needs (added unless present).

  Raises:
    ValueError: If the config is invalid (`position`: its index among the
      writer's configs, named in the message as dm-reverb does).
  """
  error = _config_error(config)
  if error:
    raise ValueError(f'Invalid configuration at position {position}: {error}')
  age = max(node_age(node) for node in config.flat)
  if not any(c.buffer_length and c.WhichOneof('cmp') == 'ge' and
             not c.inverse and c.ge >= age for c in config.conditions):
    config = copy.deepcopy(config)
    config.conditions.add(buffer_length=True, ge=age)
  return config


class _ConfigState:
  """A config and when it last applied."""

  def __init__(self, config: Config):
    self.config = config
    self.steps_since_applied = 0
    self.last_applied_step: Optional[int] = None


def _array(value: Any) -> Optional[np.ndarray]:
  return None if value is None else np.asarray(value)


def _at(values: Sequence[Any], index: int) -> Any:
  """values[index]; None for a field the step does not have."""
  return values[index] if index < len(values) else None


# Dtypes a td_error priority reads, as dm-reverb.
_TD_ERROR_DTYPES = frozenset(
    np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def _td_error_value(value: np.ndarray) -> float:
  """|value| of a td_error field's value.

  Raises:
    ValueError: Unless it is a float32/float64/int32/int64 scalar.
  """
  if value.dtype not in _TD_ERROR_DTYPES:
    raise ValueError(
        f'TD Error expects a double/float/int tensor and it is '
        f'{structured_value.data_type(value.dtype)}')
  if value.shape:
    raise ValueError('TD Error expects a scalar tensor')
  return abs(float(value))


class Patterns:
  """Applies configs to a stream of steps: keeps the cells each pattern may
  reach back to, evaluates conditions and says which items to create.

  A cell is whatever the caller stores for a field of a step (a cell
  reference of a writer, or the value itself); the values of fields that
  conditions or td_error priorities read are kept as well. Fields a config
  names but the steps lack are missing in every step (the config never
  applies, its data conditions never hold). Shared by StructuredWriter and
  PatternDataset.
  """

  def __init__(self, configs: Sequence[Config]):
    self._states = [_ConfigState(config) for config in configs]
    # History each referenced field needs, in steps.
    self._history_length: Dict[int, int] = collections.defaultdict(int)
    # Fields whose values conditions or priorities read.
    value_columns = set()
    for config in configs:
      for node in config.flat:
        index = node.flat_source_index
        self._history_length[index] = max(self._history_length[index],
                                          node_age(node))
      for condition in config.conditions:
        if condition.WhichOneof('left') == 'flat_source_index':
          value_columns.add(condition.flat_source_index)
          self._history_length[condition.flat_source_index] = max(
              1, self._history_length[condition.flat_source_index])
      if config.priority.HasField('td_error'):
        value_columns.add(config.priority.td_error.flat_source_index)
    self._cells = {index: collections.deque(maxlen=length)
                   for index, length in self._history_length.items()}
    self._values = {index: collections.deque(
        maxlen=self._history_length[index]) for index in value_columns}
    self._num_leaves: Optional[int] = None
    self._step_index = -1
    self._step_is_open = False

  @property
  def step_is_open(self) -> bool:
    return self._step_is_open

  def referenced(self, index: int) -> bool:
    """Whether some config reads field `index` (others need no cells)."""
    return index in self._cells

  def check_length(self, num_leaves: int):
    """ValueError unless steps keep the number of fields of the first."""
    if self._num_leaves is None:
      self._num_leaves = num_leaves
    elif num_leaves != self._num_leaves:
      raise ValueError(
          f'Flattened data has an unexpected length, got {num_leaves} but '
          f'wanted {self._num_leaves}.')

  def check_unset(self, values: Sequence[Any]):
    """RuntimeError if a field that configs read is given again in the open
    (partial) step."""
    if not self._step_is_open:
      return
    for index in sorted(self._cells):
      buffer = self._cells[index]
      if (_at(values, index) is not None and buffer and
          buffer[-1] is not None):
        raise RuntimeError(
            f'A value for column {index} was provided by multiple '
            f'Append/AppendPartial calls in the same step. This should never '
            f'happen so please contact the Reverb team if you encounter this '
            f'error.')

  def append(self, cells: Sequence[Any], values: Sequence[Any],
             partial_step: bool) -> List[Tuple[Config, List[List[Any]],
                                               List[bool], float]]:
    """Records a step (or part of one) and returns the items to create:
    (config, cells per pattern leaf, squeeze per leaf, priority).

    Raises:
      ValueError: If a td_error priority reads a value that is not a
        float32/float64/int32/int64 scalar.
    """
    new_step = not self._step_is_open
    if new_step:
      self._step_index += 1
      for state in self._states:
        state.steps_since_applied += 1
    for index, buffer in self._cells.items():
      cell = _at(cells, index)
      if new_step:
        buffer.append(cell)
      elif cell is not None:
        buffer[-1] = cell
    for index, buffer in self._values.items():
      value = _array(_at(values, index))
      if new_step:
        buffer.append(value)
      elif value is not None:
        buffer[-1] = value
    self._step_is_open = partial_step
    return self._apply(end_of_episode=False)

  def end_episode(self, clear_buffers: bool
                 ) -> List[Tuple[Config, List[List[Any]], List[bool], float]]:
    """The end-of-episode items; then a new episode starts (the step index
    restarts; steps since a config applied keep counting, as dm-reverb's)."""
    items = self._apply(end_of_episode=True) if self._step_index >= 0 else []
    if clear_buffers:
      for buffer in list(self._cells.values()) + list(self._values.values()):
        buffer.clear()
    for state in self._states:
      state.last_applied_step = None
    self._step_index = -1
    self._step_is_open = False
    return items

  def _left_value(self, condition: ConditionProto, state: _ConfigState,
                  end_of_episode: bool) -> Optional[int]:
    left = condition.WhichOneof('left')
    if left == 'step_index':
      return self._step_index
    if left == 'steps_since_applied':
      return state.steps_since_applied
    if left == 'buffer_length':
      return max((len(b) for b in self._cells.values()), default=0)
    if left == 'is_end_episode':
      return int(end_of_episode)
    values = self._values[condition.flat_source_index]
    # Only scalar ints and bools count; anything else fails the condition.
    value = values[-1] if values else None
    if value is None or value.shape or value.dtype.kind not in 'biu':
      return None
    return int(value)

  def _holds(self, condition: ConditionProto, state: _ConfigState,
             end_of_episode: bool) -> bool:
    left = self._left_value(condition, state, end_of_episode)
    if left is None:
      return False
    cmp = condition.WhichOneof('cmp')
    if cmp == 'eq':
      result = left == condition.eq
    elif cmp == 'ge':
      result = left >= condition.ge
    else:
      result = left % condition.mod_eq.mod == condition.mod_eq.eq
    return result != condition.inverse

  @staticmethod
  def _node_offsets(node: patterns_pb2.PatternNode,
                    size: int) -> Optional[List[int]]:
    """Buffer positions of a node's cells, None if out of range."""
    if not node.HasField('start'):
      offsets = [size + node.stop]
    else:
      stop = size + node.stop if node.HasField('stop') else size
      offsets = list(range(size + node.start, stop, node.step or 1))
    return offsets if offsets and min(offsets) >= 0 else None

  def _apply(self, end_of_episode: bool):
    items = []
    for state in self._states:
      if state.last_applied_step == self._step_index:
        continue
      config = state.config
      if not all(self._holds(c, state, end_of_episode)
                 for c in config.conditions):
        continue
      columns, squeeze, td_values = [], [], []
      for node in config.flat:
        buffer = self._cells[node.flat_source_index]
        offsets = self._node_offsets(node, len(buffer))
        if offsets is None or any(buffer[i] is None for i in offsets):
          break  # Not all cells are there (yet): skip the config.
        columns.append([buffer[i] for i in offsets])
        squeeze.append(not node.HasField('start'))
        # The td_error field's last node in the pattern counts.
        if (config.priority.HasField('td_error') and
            node.flat_source_index ==
            config.priority.td_error.flat_source_index):
          values = self._values[node.flat_source_index]
          td_values = [values[i] for i in offsets]
      else:
        items.append((config, columns, squeeze,
                      self._priority(config, td_values)))
        state.last_applied_step = self._step_index
        state.steps_since_applied = 0
    return items

  @staticmethod
  def _priority(config: Config, td_values: List[np.ndarray]) -> float:
    """The item's priority (a td_error over no values is 0)."""
    kind = config.priority.WhichOneof('priority_fn')
    if kind == 'constant_fn':
      return config.priority.constant_fn.value
    if kind is None:
      raise ValueError(
          'The Priority function undefined. This should never happen')
    magnitudes = [_td_error_value(value) for value in td_values]
    if not magnitudes:
      return 0.0
    weight = config.priority.td_error.max_priority_weight
    return (weight * max(magnitudes) +
            (1 - weight) * sum(magnitudes) / len(magnitudes))

