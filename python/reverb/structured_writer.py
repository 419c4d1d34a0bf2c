"""StructuredWriter: items built from patterns over recent steps, when
conditions hold (also `reverb.structured`).

A config (`create_config`) names a pattern (a nest of `PatternNode`s, made
by indexing a reference step: `ref['obs'][-2:]`), a table, conditions
(`Condition.step_index() % 2 == 0`, ...) and a priority. After every append
(and at `end_episode`) each config whose conditions hold inserts one item,
at most once per step; a config whose cells are not all present yet is
skipped.
"""

import collections
import copy
import math
from typing import Any, Callable, Dict, List, NewType, Optional, Sequence, Tuple

import numpy as np

from reverb import _tree
from reverb import pybind
from reverb import specs
from reverb import structured_value
from reverb.cc import patterns_pb2

Config = patterns_pb2.StructuredWriterConfig
ConditionProto = patterns_pb2.Condition
Pattern = Any  # A nest of patterns_pb2.PatternNode.
ReferenceStep = NewType('ReferenceStep', Any)
PatternTransform = Callable[[ReferenceStep], Pattern]


# --- Building configs ----------------------------------------------------------


class _RefNode:
  """A leaf of a reference step: indexing it makes a PatternNode."""

  def __init__(self, index: int):
    self._index = index

  def __getitem__(self, key) -> patterns_pb2.PatternNode:
    if isinstance(key, (int, np.integer)):
      key = slice(int(key))
    elif not isinstance(key, slice):
      raise ValueError(
          f'Key must be int or slice but got {key} (type {type(key)}).')
    return patterns_pb2.PatternNode(
        flat_source_index=self._index, start=key.start, stop=key.stop,
        step=key.step)


def create_reference_step(step_structure: Any) -> ReferenceStep:
  """`step_structure` with leaves that build PatternNodes when indexed."""
  count = len(_tree.flatten(step_structure))
  return _tree.unflatten_as(step_structure,
                            [_RefNode(i) for i in range(count)])


def pattern_from_transform(step_structure: Any,
                           transform: PatternTransform) -> Pattern:
  """transform(create_reference_step(step_structure))."""
  return transform(create_reference_step(step_structure))


def constant_priority_fn(value: float) -> patterns_pb2.Priority:
  """Every item gets priority `value`."""
  return patterns_pb2.Priority(
      constant_fn=patterns_pb2.Priority.ConstantPriorityFn(value=value))


def td_error(max_priority_weight: float, step_structure: Any,
             get_field_from_step_fn: Callable[[Any], Any]
            ) -> patterns_pb2.Priority:
  """Priority w * max|td| + (1 - w) * mean|td| over the item's steps.

  `get_field_from_step_fn(step)` picks the per-step TD error field of a step
  structure; the pattern must include that field.
  """
  indices = _tree.unflatten_as(
      step_structure, list(range(len(_tree.flatten(step_structure)))))
  return patterns_pb2.Priority(
      td_error=patterns_pb2.Priority.TDError(
          max_priority_weight=max_priority_weight,
          flat_source_index=get_field_from_step_fn(indices)))


def create_config(pattern: Pattern,
                  table: str,
                  conditions: Sequence[ConditionProto] = (),
                  priority: Optional[patterns_pb2.Priority] = None) -> Config:
  """A config inserting `pattern` into `table` (priority 1 by default)."""
  structure = _tree.map_structure(lambda _: None, pattern)
  return Config(
      flat=_tree.flatten(pattern),
      pattern_structure=structured_value.encode(structure, none_leaves=True),
      table=table,
      priority=priority or constant_priority_fn(1.0),
      conditions=conditions)


def unpack_pattern(config: Config) -> Pattern:
  """The pattern of a config, as a nest of PatternNodes."""
  if not config.HasField('pattern_structure'):
    return list(config.flat)
  structure = structured_value.decode(config.pattern_structure)
  return _tree.unflatten_as(structure, list(config.flat))


def _node_length(node: patterns_pb2.PatternNode) -> Optional[int]:
  """Cells a sliced node yields (None for a single, squeezed cell)."""
  if not node.HasField('start'):
    return None
  return math.ceil((node.stop - node.start) / (node.step or 1))


def infer_signature(configs: Sequence[Config], step_spec: Any) -> Any:
  """The signature of a table whose items all come from `configs`.

  Raises:
    ValueError: If there are no configs, or they differ in structure, table,
      dtypes or trailing shapes.
  """
  if not configs:
    raise ValueError('At least one config must be provided.')
  if any(c.pattern_structure != configs[0].pattern_structure for c in configs):
    raise ValueError(
        'All configs must have exactly the same pattern_structure.')
  if any(c.table != configs[0].table for c in configs):
    raise ValueError(
        f'All configs must target the same table but provided configs '
        f'included {", ".join(sorted(set(c.table for c in configs)))}.')
  flat_step_spec = _tree.flatten(step_spec)
  patterns = [unpack_pattern(config) for config in configs]
  flat_patterns = [_tree.flatten_with_path(p) for p in patterns]
  leaves = []
  for k, (path, _) in enumerate(flat_patterns[0]):
    nodes = [flat[k][1] for flat in flat_patterns]
    sources = [flat_step_spec[node.flat_source_index] for node in nodes]
    dtypes = [structured_value.spec_data_type_and_shape(s)[0] for s in sources]
    if any(dtype != dtypes[0] for dtype in dtypes):
      raise ValueError(
          f'Configs produce trajectories with multiple dtypes at {path}. '
          f'Got {[s.dtype for s in sources]}.')
    shapes = []
    for node, source in zip(nodes, sources):
      shape = list(structured_value.spec_data_type_and_shape(source)[1] or ())
      length = _node_length(node)
      shapes.append(shape if length is None else [length] + shape)
    if (any(len(s) != len(shapes[0]) for s in shapes) or
        any(s[1:] != shapes[0][1:] for s in shapes)):
      raise ValueError(
          f'Configs produce trajectories with incompatible shapes at {path}. '
          f'Got {shapes}.')
    shape = shapes[0] if all(s == shapes[0] for s in shapes) else (
        [None] + shapes[0][1:])
    spec_class = type(sources[0])
    if not spec_class.__module__.startswith('tensorflow'):
      spec_class = specs.TensorSpec
    else:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      spec_class = tf.TensorSpec
    leaves.append(spec_class(shape, sources[0].dtype,
                             '/'.join(str(x) for x in path)))
  return _tree.unflatten_as(patterns[0], leaves)


class _ConditionBuilder:
  """Builds a Condition from comparisons (`% m == k`, `>=`, `<`, ...)."""

  def __init__(self, incomplete: ConditionProto):
    self._incomplete = incomplete

  def __mod__(self, cmp: int) -> '_ConditionBuilder':
    condition = copy.deepcopy(self._incomplete)
    condition.mod_eq.mod = cmp
    return _ConditionBuilder(condition)

  def __eq__(self, cmp: int) -> ConditionProto:  # type: ignore[override]
    condition = copy.deepcopy(self._incomplete)
    if condition.mod_eq.mod:
      condition.mod_eq.eq = cmp
    else:
      condition.eq = cmp
    return condition

  def __ne__(self, cmp: int) -> ConditionProto:  # type: ignore[override]
    condition = self == cmp
    condition.inverse = True
    return condition

  def __ge__(self, cmp: int) -> ConditionProto:
    condition = copy.deepcopy(self._incomplete)
    condition.ge = cmp
    return condition

  def __gt__(self, cmp: int) -> ConditionProto:
    return self >= cmp + 1

  def __le__(self, cmp: int) -> ConditionProto:
    condition = self > cmp
    condition.inverse = True
    return condition

  def __lt__(self, cmp: int) -> ConditionProto:
    return self <= cmp - 1

  __hash__ = None


class Condition:
  """Building blocks of conditions."""

  @staticmethod
  def step_index() -> _ConditionBuilder:
    """Index of the newest step in the episode (from 0)."""
    return _ConditionBuilder(ConditionProto(step_index=True))

  @staticmethod
  def steps_since_applied() -> _ConditionBuilder:
    """Steps appended since the config last inserted an item."""
    return _ConditionBuilder(ConditionProto(steps_since_applied=True))

  @staticmethod
  def is_end_episode() -> ConditionProto:
    """True only while `end_episode` is being called."""
    return ConditionProto(is_end_episode=True, eq=1)

  @staticmethod
  def data(step_structure: Any) -> Any:
    """Per field of the step: the value of a scalar int or bool field."""
    count = len(_tree.flatten(step_structure))
    return _tree.unflatten_as(step_structure, [
        _ConditionBuilder(ConditionProto(flat_source_index=i))
        for i in range(count)
    ])


# --- Validation ------------------------------------------------------------------


def _node_age(node: patterns_pb2.PatternNode) -> int:
  """Steps of history a node reaches back."""
  return -node.start if node.HasField('start') else -node.stop


def _validate_node(node: patterns_pb2.PatternNode):
  error = None
  if node.flat_source_index < 0:
    error = 'flat_source_index must be >= 0'
  elif not node.HasField('start') and not node.HasField('stop'):
    error = 'start or stop must be set'
  elif node.HasField('start') and node.start >= 0:
    error = 'start must be < 0'
  elif node.HasField('stop') and node.stop > 0:
    error = 'stop must be <= 0'
  elif (node.HasField('start') and node.HasField('stop') and
        node.start >= node.stop):
    error = 'start must be < stop'
  elif not node.HasField('start') and node.stop >= 0:
    error = 'stop must be < 0 when start is not set'
  elif node.HasField('step') and not node.HasField('start'):
    error = 'step requires start'
  elif node.HasField('step') and node.step <= 0:
    error = 'step must be > 0'
  if error:
    raise ValueError(f'Invalid PatternNode ({error}): {node}')


def _validate_condition(condition: ConditionProto):
  error = None
  if not condition.WhichOneof('left'):
    error = 'left must be set'
  elif not condition.WhichOneof('cmp'):
    error = 'cmp must be set'
  elif condition.HasField('mod_eq') and condition.mod_eq.mod <= 0:
    error = 'mod_eq.mod must be > 0'
  elif condition.HasField('mod_eq') and condition.mod_eq.eq < 0:
    error = 'mod_eq.eq must be >= 0'
  elif condition.is_end_episode and (condition.WhichOneof('cmp') != 'eq' or
                                     condition.eq != 1 or condition.inverse):
    error = 'is_end_episode only works with eq=1 and no inverse'
  if error:
    raise ValueError(f'Invalid Condition ({error}): {condition}')


def validated(config: Config) -> Config:
  """The config, validated, with a buffer_length condition that ensures
  the history it needs (added unless present)."""
  if not config.flat:
    raise ValueError(f'Config has an empty pattern: {config}')
  if not config.table:
    raise ValueError(f'Config has no table: {config}')
  for node in config.flat:
    _validate_node(node)
  for condition in config.conditions:
    _validate_condition(condition)
  if config.priority.HasField('td_error') and not any(
      node.flat_source_index == config.priority.td_error.flat_source_index
      for node in config.flat):
    raise ValueError(
        'The td_error priority field must be part of the pattern: '
        f'{config}')
  age = max(_node_age(node) for node in config.flat)
  if not any(c.buffer_length and c.WhichOneof('cmp') == 'ge' and
             not c.inverse and c.ge >= age for c in config.conditions):
    config = copy.deepcopy(config)
    config.conditions.add(buffer_length=True, ge=age)
  return config


# --- Writing ---------------------------------------------------------------------


class _ConfigState:
  """A config and when it last applied."""

  def __init__(self, config: Config):
    self.config = config
    self.steps_since_applied = 0
    self.last_applied_step: Optional[int] = None


def _scalar(value: Any) -> Optional[np.ndarray]:
  """`value` as a numeric numpy scalar, else None."""
  if value is None:
    return None
  array = np.asarray(value)
  return array if array.shape == () and array.dtype.kind in 'biuf' else None


class Patterns:
  """Applies configs to a stream of steps: keeps the cells each pattern may
  reach back to, evaluates conditions and says which items to create.

  A cell is whatever the caller stores for a field of a step (a cell
  reference of a writer, or the value itself); the raw values of fields that
  conditions or td_error priorities read are kept as well. Shared by
  StructuredWriter and PatternDataset.
  """

  def __init__(self, configs: Sequence[Config]):
    self._states = [_ConfigState(config) for config in configs]
    # History each referenced field needs, in steps.
    self._history_length: Dict[int, int] = collections.defaultdict(int)
    # Fields whose raw scalar values conditions or priorities read.
    value_columns = set()
    for config in configs:
      for node in config.flat:
        index = node.flat_source_index
        self._history_length[index] = max(self._history_length[index],
                                          _node_age(node))
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
    """ValueError unless steps keep `num_leaves` fields, all that the
    configs refer to."""
    if self._num_leaves is None:
      highest = max(self._history_length, default=-1)
      if highest >= num_leaves:
        raise ValueError(
            f'Configs refer to field {highest} but steps have only '
            f'{num_leaves} fields.')
      self._num_leaves = num_leaves
    elif num_leaves != self._num_leaves:
      raise ValueError(
          f'Flattened data has an unexpected length, got {num_leaves} vs '
          f'expected {self._num_leaves}.')

  def append(self, cells: Sequence[Any], values: Sequence[Any],
             partial_step: bool) -> List[Tuple[Config, List[List[Any]],
                                               List[bool], float]]:
    """Records a step (or part of one) and returns the items to create:
    (config, cells per pattern leaf, squeeze per leaf, priority)."""
    new_step = not self._step_is_open
    if new_step:
      self._step_index += 1
      for state in self._states:
        state.steps_since_applied += 1
    for index, buffer in self._cells.items():
      if new_step:
        buffer.append(cells[index])
      elif cells[index] is not None:
        buffer[-1] = cells[index]
    for index, buffer in self._values.items():
      value = _scalar(values[index])
      if new_step:
        buffer.append(value)
      elif value is not None:
        buffer[-1] = value
    self._step_is_open = partial_step
    return self._apply(end_of_episode=False)

  def end_episode(self, clear_buffers: bool
                 ) -> List[Tuple[Config, List[List[Any]], List[bool], float]]:
    """The end-of-episode items; then a new episode starts."""
    items = self._apply(end_of_episode=True) if self._step_index >= 0 else []
    if clear_buffers:
      for buffer in list(self._cells.values()) + list(self._values.values()):
        buffer.clear()
    for state in self._states:
      state.steps_since_applied = 0
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
    if not values or values[-1] is None or values[-1].dtype.kind == 'f':
      return None
    return int(values[-1])

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
      columns, squeeze, td_values = [], [], None
      for node in config.flat:
        buffer = self._cells[node.flat_source_index]
        offsets = self._node_offsets(node, len(buffer))
        if offsets is None or any(buffer[i] is None for i in offsets):
          break  # Not all cells are there (yet): skip the config.
        columns.append([buffer[i] for i in offsets])
        squeeze.append(not node.HasField('start'))
        if (config.priority.HasField('td_error') and td_values is None and
            node.flat_source_index ==
            config.priority.td_error.flat_source_index):
          values = self._values[node.flat_source_index]
          td_values = [values[i] for i in offsets]
          if any(v is None for v in td_values):
            raise ValueError(
                f'The td_error field {node.flat_source_index} must hold '
                f'numeric scalars.')
      else:
        items.append((config, columns, squeeze,
                      self._priority(config, td_values)))
        state.last_applied_step = self._step_index
        state.steps_since_applied = 0
    return items

  @staticmethod
  def _priority(config: Config, td_values: Optional[List[Any]]) -> float:
    if not config.priority.HasField('td_error'):
      return config.priority.constant_fn.value
    weight = config.priority.td_error.max_priority_weight
    errors = np.abs(np.asarray(td_values, np.float64))
    return float(weight * errors.max() + (1 - weight) * errors.mean())


class StructuredWriter:
  """Appends steps and inserts the items its configs describe.

  Made by `Client.structured_writer`.
  """

  def __init__(self, internal_writer: pybind.TrajectoryWriter,
               configs: Sequence[Config]):
    self._writer = internal_writer
    self._patterns = Patterns(configs)

  @property
  def step_is_open(self) -> bool:
    """Whether the last append was partial."""
    return self._patterns.step_is_open

  def append(self, data: Any, *, partial_step: bool = False):
    """Appends a step (or part of one, with `partial_step`), then inserts
    the items of the configs that apply.

    Raises:
      ValueError: If the flattened step changes length, or a pattern refers
        to a field the step does not have.
    """
    flat = _tree.flatten(data)
    self._patterns.check_length(len(flat))
    # Fields no config reads are not written at all.
    cells = [value if self._patterns.referenced(index) else None
             for index, value in enumerate(flat)]
    if partial_step:
      refs = self._writer.AppendPartial(cells)
    else:
      refs = self._writer.Append(cells)
    self._create(self._patterns.append(refs, flat, partial_step))

  def flush(self, block_until_num_items: int = 0,
            timeout_ms: Optional[int] = None):
    """Waits until at most `block_until_num_items` items are unconfirmed.

    Raises:
      DeadlineExceededError: If `timeout_ms` passes first.
    """
    self._writer.Flush(block_until_num_items, timeout_ms)

  def end_episode(self, clear_buffers: bool = True,
                  timeout_ms: Optional[int] = None):
    """Applies the end-of-episode configs, flushes and starts a new episode.

    Raises:
      DeadlineExceededError: If `timeout_ms` passes first.
    """
    self._create(self._patterns.end_episode(clear_buffers))
    self._writer.EndEpisode(clear_buffers, timeout_ms)

  def close(self):
    self._writer.Close()

  def _create(self, items):
    for config, columns, squeeze, priority in items:
      self._writer.CreateItem(config.table, priority, columns, squeeze)


def make_writer(client: pybind.Client,
                configs: Sequence[Config]) -> StructuredWriter:
  """A StructuredWriter over a new TrajectoryWriter of `client`."""
  if not configs:
    raise ValueError('At least one config must be provided.')
  configs = [validated(config) for config in configs]
  history = max(_node_age(node) for config in configs for node in config.flat)
  return StructuredWriter(
      client.NewTrajectoryWriter(pybind.AutoTunedChunkerOptions(history, 1.0)),
      configs)
