"""StructuredWriter: items built from patterns over recent steps, when
conditions hold (also `reverb.structured`).

A config (`create_config`) names a pattern (a nest of `PatternNode`s, made
by indexing a reference step: `ref['obs'][-2:]`), a table, conditions
(`Condition.step_index() % 2 == 0`, ...) and a priority. After every append
(and at `end_episode`) each config whose conditions hold inserts one item,
at most once per step; a config whose cells are not all present yet is
skipped. The engine that validates and applies configs is reverb._patterns.
"""

import copy
import math
from typing import Any, Callable, List, NewType, Optional, Sequence, Tuple

import numpy as np

from reverb import _patterns
from reverb import _tree
from reverb import errors
from reverb import pybind
from reverb import structured_value
from reverb.cc import patterns_pb2

Config = patterns_pb2.StructuredWriterConfig
ConditionProto = patterns_pb2.Condition
Pattern = Any  # A nest of patterns_pb2.PatternNode.
ReferenceStep = NewType('ReferenceStep', Any)
PatternTransform = Callable[[ReferenceStep], Pattern]

# The pattern engine's entry points (reverb._patterns), importable from here
# as before the engine had a module of its own.
Patterns = _patterns.Patterns
validated = _patterns.validated


# --- Building configs ----------------------------------------------------------


class _RefNode:
  """A leaf of a reference step: indexing it makes a PatternNode."""

  def __init__(self, index: int):
    self._index = index

  def __getitem__(self, key) -> patterns_pb2.PatternNode:
    """`[i]` (Python or numpy int) is the single cell i; `[a:b:c]` a slice.

    Raises:
      ValueError: For other keys (worded as dm-reverb's, "by got" included).
    """
    if isinstance(key, (int, np.integer)):
      key = slice(int(key))
    elif not isinstance(key, slice):
      raise ValueError(
          f'Key must be int or slice by got {key} (type {type(key)}).')
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


def _shape_text(shape: List[Optional[int]]) -> str:
  return f'TensorShape({shape})'


def _leaf_spec(spec_class, path: Tuple[Any, ...], nodes: Sequence[Any],
               flat_step_spec: Sequence[Any]):
  """The spec of one pattern leaf, made by `nodes` (one per config)."""
  dtypes = [flat_step_spec[node.flat_source_index].dtype for node in nodes]
  if any(dtype != dtypes[0] for dtype in dtypes):
    raise ValueError(
        f'Configs produce trajectories with multiple dtypes at {path}. '
        f'Got {dtypes}.')
  shapes = []
  for node in nodes:
    shape = structured_value.spec_shape(flat_step_spec[node.flat_source_index])
    if shape is None:
      raise ValueError('Cannot iterate over a shape with unknown rank.')
    length = _node_length(node)
    shapes.append(list(shape) if length is None else [length, *shape])
  if (any(len(s) != len(shapes[0]) for s in shapes) or
      any(s[1:] != shapes[0][1:] for s in shapes)):
    raise ValueError(
        f'Configs produce trajectories with incompatible shapes at {path}. '
        f'Got [{", ".join(_shape_text(s) for s in shapes)}].')
  shape = shapes[0] if all(s == shapes[0] for s in shapes) else (
      [None] + shapes[0][1:])
  return spec_class(shape, dtypes[0], '/'.join(str(x) for x in path))


def infer_signature(configs: Sequence[Config], step_spec: Any) -> Any:
  """The signature of a table whose items all come from `configs`.

  Args:
    configs: Every config that makes items for the table.
    step_spec: A nest of specs (anything with `shape` and `dtype`: TensorFlow
      or `reverb.specs` specs, numpy arrays) of the steps appended.

  Returns:
    A nest (as the patterns) of `tf.TensorSpec` whenever TensorFlow can be
    imported (it is imported), else of `reverb.specs.TensorSpec`. Names are
    the leaves' paths joined by '/'; a leading dimension on which the
    configs disagree is None. A strided slice `[start:stop:step]` has
    ceil((stop - start) / step) rows (dm-reverb 0.14 rounds down).

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
  spec_class = structured_value.spec_classes(import_tensorflow=True)[0]
  flat_step_spec = _tree.flatten(step_spec)
  patterns = [unpack_pattern(config) for config in configs]
  flat_patterns = [_tree.flatten_with_path(p) for p in patterns]
  leaves = [
      _leaf_spec(spec_class, path, [flat[k][1] for flat in flat_patterns],
                 flat_step_spec)
      for k, (path, _) in enumerate(flat_patterns[0])
  ]
  return _tree.unflatten_as(patterns[0], leaves)


def _as_int(value: Any) -> Any:
  """Python and numpy bools as ints (protocol buffers refuse bools for int
  fields); anything else as given."""
  return int(value) if isinstance(value, (bool, np.bool_)) else value


class _ConditionBuilder:
  """Builds a Condition from comparisons (`% m == k`, `>=`, `<`, ...)."""

  def __init__(self, incomplete: ConditionProto):
    self._incomplete = incomplete

  def __mod__(self, cmp: int) -> '_ConditionBuilder':
    condition = copy.deepcopy(self._incomplete)
    condition.mod_eq.mod = _as_int(cmp)
    return _ConditionBuilder(condition)

  def __eq__(self, cmp: int) -> ConditionProto:  # type: ignore[override]
    condition = copy.deepcopy(self._incomplete)
    if condition.mod_eq.mod:
      condition.mod_eq.eq = _as_int(cmp)
    else:
      condition.eq = _as_int(cmp)
    return condition

  def __ne__(self, cmp: int) -> ConditionProto:  # type: ignore[override]
    condition = self == cmp
    condition.inverse = True
    return condition

  def __ge__(self, cmp: int) -> ConditionProto:
    condition = copy.deepcopy(self._incomplete)
    condition.ge = _as_int(cmp)
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
    """Per field of the step: the value of a scalar int or bool field in
    the newest step (`data['done'] == True`); a condition on a field that
    is missing, a float or not a scalar does not hold."""
    count = len(_tree.flatten(step_structure))
    return _tree.unflatten_as(step_structure, [
        _ConditionBuilder(ConditionProto(flat_source_index=i))
        for i in range(count)
    ])


# --- Writing ---------------------------------------------------------------------


class StructuredWriter:
  """Appends steps and inserts the items its configs describe.

  Made by `Client.structured_writer`. Every step must flatten to as many
  fields as the first; fields no config reads are not written.
  """

  def __init__(self, internal_writer: pybind.TrajectoryWriter,
               configs: Sequence[Config]):
    self._writer = internal_writer
    self._patterns = Patterns(configs)
    # The first step's structure (None leaves), to name fields in errors.
    self._structure = None

  @property
  def step_is_open(self) -> bool:
    """Whether the last append was partial."""
    return self._patterns.step_is_open

  def append(self, data: Any, *, partial_step: bool = False):
    """Appends a step (or part of one, with `partial_step`), then inserts
    the items of the configs that apply.

    Leaves may be None (not given in this call). With `partial_step` the
    step stays open, and later calls give its other fields; the last call of
    the step has `partial_step=False`.

    Raises:
      ValueError: If the flattened step changes length, a field's dtype or
        shape differs from its first step (nothing of the step is written),
        or a td_error priority reads a value that is not a
        float32/float64/int32/int64 scalar.
      RuntimeError: If a field that configs read was already given in the
        open step.
    """
    flat = _tree.flatten(data)
    if self._structure is None:
      self._structure = _tree.map_structure(lambda _: None, data)
    self._patterns.check_length(len(flat))
    self._patterns.check_unset(flat)
    cells = [value if self._patterns.referenced(index) else None
             for index, value in enumerate(flat)]
    try:
      if partial_step:
        refs = self._writer.AppendPartial(cells)
      else:
        refs = self._writer.Append(cells)
    except ValueError as e:
      raise ValueError(self._name_column(str(e))) from e
    self._create(self._patterns.append(refs, flat, partial_step))

  def _name_column(self, message: str) -> str:
    """`message` with the path of the column it names ("... for column 3
    (path=('b', 'd', 1)). ..."), as dm-reverb words it."""
    head, found, tail = message.partition(' for column ')
    index, found_index, rest = tail.partition('. ')
    if not found or not found_index or not index.isdigit():
      return message
    path = _tree.flatten_with_path(self._structure)[int(index)][0]
    return f'{head} for column {index} (path={path}). {rest}'

  def flush(self, block_until_num_items: int = 0,
            timeout_ms: Optional[int] = None):
    """Waits until at most `block_until_num_items` items are unconfirmed.

    Args:
      block_until_num_items: Items that may stay unconfirmed.
      timeout_ms: Longest wait; None waits forever, <= 0 not at all.

    Raises:
      ValueError: If `block_until_num_items` < 0.
      DeadlineExceededError: If `timeout_ms` passes first (the items are
        still written in the background).
    """
    if block_until_num_items < 0:
      raise ValueError(
          f'block_until_num_items must be >= 0, got {block_until_num_items}')
    # The writer waits forever for a timeout <= 0, where dm-reverb's
    # StructuredWriter gives up at once: ask for the shortest wait instead.
    wait_ms = None if timeout_ms is None else max(timeout_ms, 1)
    with errors.writer_call_timeout('Flush', timeout_ms):
      self._writer.Flush(block_until_num_items, wait_ms)

  def end_episode(self, clear_buffers: bool = True,
                  timeout_ms: Optional[int] = None):
    """Applies the end-of-episode configs, flushes and starts a new episode.

    Args:
      clear_buffers: Forget the episode's steps (else patterns of the next
        episode may reach back into this one).
      timeout_ms: Longest wait for the flush; None waits forever, <= 0 not
        at all.

    Raises:
      DeadlineExceededError: If `timeout_ms` passes first (the episode still
        ends; the items are written in the background).
    """
    self._create(self._patterns.end_episode(clear_buffers))
    with errors.writer_call_timeout('End episode', timeout_ms):
      self._writer.EndEpisode(clear_buffers, timeout_ms)

  def close(self):
    self._writer.Close()

  def _create(self, items):
    for config, columns, squeeze, priority in items:
      self._writer.CreateItem(config.table, priority, columns, squeeze)


def make_writer(client: pybind.Client,
                configs: Sequence[Config]) -> StructuredWriter:
  """A StructuredWriter over a new TrajectoryWriter of `client`.

  Raises:
    ValueError: If `configs` is empty or a config is invalid.
  """
  if not configs:
    raise ValueError('At least one config must be provided.')
  configs = [validated(config, i) for i, config in enumerate(configs)]
  history = max(_patterns.node_age(node)
                for config in configs for node in config.flat)
  return StructuredWriter(
      client.NewTrajectoryWriter(pybind.AutoTunedChunkerOptions(history, 1.0)),
      configs)
