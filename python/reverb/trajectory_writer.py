"""TrajectoryWriter: append steps, then insert items over any recent cells.

Each leaf of the appended structure is a column. `history` mirrors the
structure; indexing a column's history (`[-1]`, `[-3:]`, `[[0, 2]]`) gives a
`TrajectoryColumn` of cell references, and `create_item` inserts a nest of
such columns. Cells are chunked per column in C++ and streamed in the
background: `append` and `create_item` do not wait for the server;
`flush` and `end_episode` do (with optional timeouts).

Beyond dm-reverb: `append_batch` appends T steps given with a leading time
dimension in one call.
"""

import collections
import operator
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from reverb import _tree
from reverb import errors
from reverb import pybind
from reverb import structured_value

Path = Tuple[Union[int, str], ...]


class TrajectoryColumn:
  """Cells of one column, to be inserted as (part of) an item.

  Args:
    data_references: `pybind.WeakCellRef`s, oldest first.
    squeeze: Insert the single cell without a time dimension.
    path: Where the column comes from, for error messages.

  Raises:
    ValueError: If squeezed with other than one cell, or a cell is None
      (expired from the history, or never set).
  """

  __slots__ = ('_data_references', '_squeeze', '_path')

  def __init__(self,
               data_references: Sequence[pybind.WeakCellRef],
               *,
               squeeze: bool = False,
               path: Optional[Path] = None):
    if squeeze and len(data_references) != 1:
      raise ValueError(
          f'Columns must contain exactly one data reference when squeeze '
          f'set, got {len(data_references)}')
    if any(ref is None for ref in data_references):
      raise ValueError(
          f'TrajectoryColumns cannot contain any None data references, got '
          f'{list(data_references)} for TrajectoryColumn at path {path}')
    self._data_references = tuple(data_references)
    self._squeeze = squeeze
    self._path = path

  def __len__(self) -> int:
    return len(self._data_references)

  def __iter__(self):
    return iter(self._data_references)

  def __getitem__(self, val) -> 'TrajectoryColumn':
    path = None if self._path is None else self._path + (val,)
    if isinstance(val, slice):
      return TrajectoryColumn(self._data_references[val], path=path)
    if isinstance(val, list):
      return TrajectoryColumn([self._data_references[i] for i in val],
                              path=path)
    try:
      index = operator.index(val)
    except TypeError:
      raise TypeError(
          f'TrajectoryColumn indices must be integers, slices or lists of '
          f'integers, not {type(val).__name__}') from None
    return TrajectoryColumn([self._data_references[index]], squeeze=True,
                            path=path)

  @property
  def is_squeezed(self) -> bool:
    return self._squeeze

  @property
  def shape(self) -> Tuple[Optional[int], ...]:
    cell_shape = tuple(self._data_references[0].shape)
    return cell_shape if self._squeeze else (len(self),) + cell_shape

  @property
  def dtype(self) -> np.dtype:
    return self._data_references[0].dtype

  def numpy(self) -> np.ndarray:
    """The column's data (stacked along time unless squeezed).

    Raises:
      RuntimeError: If a cell has expired.
    """
    if any(ref.expired for ref in self._data_references):
      raise RuntimeError(
          'Cannot convert TrajectoryColumn with expired data references to '
          'numpy array.')
    arrays = [ref.numpy() for ref in self._data_references]
    return arrays[0] if self._squeeze else np.stack(arrays)


class _ColumnHistory:
  """The cells of one column in this episode; the last `buffer_size` are
  kept, older (and never set) ones are None."""

  def __init__(self, path: Path, buffer_size: int, history_padding: int = 0):
    self._path = path
    self._references = collections.deque(maxlen=buffer_size)
    self._length = 0
    for _ in range(history_padding):
      self.append(None)

  def append(self, reference: Optional[pybind.WeakCellRef]):
    self._references.append(reference)
    self._length += 1

  def extend(self, references: Sequence[Optional[pybind.WeakCellRef]]):
    self._references.extend(references)
    self._length += len(references)

  def set_last(self, reference: pybind.WeakCellRef):
    if not self.can_set_last:
      raise RuntimeError(f'Cannot set the last cell of {self._path}.')
    self._references[-1] = reference

  @property
  def can_set_last(self) -> bool:
    return bool(self._references) and self._references[-1] is None

  def reset(self):
    self._references.clear()
    self._length = 0

  def __len__(self) -> int:
    return self._length

  def _reference(self, index: int) -> Optional[pybind.WeakCellRef]:
    if index < 0:
      index += self._length
    if not 0 <= index < self._length:
      raise IndexError(
          f'Index {index} out of range for the {self._length} steps of '
          f'column {self._path}.')
    first_kept = self._length - len(self._references)
    return None if index < first_kept else self._references[index - first_kept]

  def __getitem__(self, val) -> TrajectoryColumn:
    if type(val) is int:  # The common case (one per column and item), inlined.
      references = self._references
      reference = (references[val] if -len(references) <= val < 0 else
                   self._reference(val))
      if reference is not None:
        column = TrajectoryColumn.__new__(TrajectoryColumn)
        column._data_references = (reference,)
        column._squeeze = True
        column._path = self._path + (val,)
        return column
    path = self._path + (val,)
    if isinstance(val, slice):
      return TrajectoryColumn(
          [self._reference(i) for i in range(*val.indices(self._length))],
          path=path)
    if isinstance(val, list):
      return TrajectoryColumn([self._reference(i) for i in val], path=path)
    try:
      index = operator.index(val)
    except TypeError:
      raise TypeError(
          f'History indices must be integers, slices or lists of integers, '
          f'not {type(val).__name__}') from None
    return TrajectoryColumn([self._reference(index)], squeeze=True, path=path)


def _check_item(table: str, signature: structured_value.FlatSignature,
                trajectory: Any,
                columns: Sequence[TrajectoryColumn]):
  """ValueError unless the columns match the table's signature."""
  specs = signature.specs
  if len(specs) != len(columns):
    raise ValueError(
        f'Unable to create item in table \'{table}\': the trajectory has '
        f'{len(columns)} columns but the table signature has {len(specs)}: '
        f'{signature.signature}.')
  for column, (spec, spec_dtype, spec_shape) in zip(columns, specs):
    shape = column.shape
    if (structured_value.data_type(column.dtype) != spec_dtype or
        not structured_value.shapes_compatible(spec_shape, shape)):
      raise ValueError(
          f'Unable to create item in table \'{table}\' since the provided '
          f'trajectory is inconsistent with the table signature: column '
          f'{column._path} has dtype {column.dtype} and shape {shape} but '  # pylint: disable=protected-access
          f'the signature expects {spec}. Trajectory: {trajectory}')


class TrajectoryWriter:
  """Writes steps and items of recent cells (see the module docstring).

  Made by `Client.trajectory_writer`. Use as a context manager to flush on
  exit, and call `close()` when done.
  """

  def __init__(self,
               internal_writer: pybind.TrajectoryWriter,
               get_signature: Optional[Callable[[str], Any]] = None):
    self._writer = internal_writer
    # Client-side item validation: table name -> flattened signature (or
    # None), or raises ValueError for unknown tables. None disables
    # validation.
    self._get_signature = get_signature
    self._signatures: Dict[str, Optional[structured_value.FlatSignature]] = {}
    self._template = None  # Union of the appended structures, None leaves.
    self._history = None  # The template with _ColumnHistory leaves.
    self._columns: List[_ColumnHistory] = []
    self._column_index: Dict[Path, int] = {}
    self._column_config: Dict[Path, pybind.ChunkerOptions] = {}
    self._last_step_is_open = False
    self._closed = False

  def __enter__(self) -> 'TrajectoryWriter':
    return self

  def __exit__(self, exc_type, exc_value, traceback):
    if exc_type is None or not issubclass(exc_type, errors.ReverbError):
      self.flush()

  def __del__(self):
    if not getattr(self, '_closed', True):
      self.close()

  @property
  def history(self):
    """The appended structure, each leaf the history of its column."""
    if self._history is None:
      raise RuntimeError('history not accessible before the first append.')
    return self._history

  @property
  def episode_steps(self) -> int:
    """Complete steps appended since the episode began."""
    return self._writer.episode_steps

  def configure(self, path: Path, *, num_keep_alive_refs: int,
                max_chunk_length: Optional[int]):
    """Chunking of the column at `path` (as from flatten_with_path).

    `max_chunk_length=None` tunes the chunk length automatically.
    """
    if num_keep_alive_refs < 1:
      raise ValueError(
          f'num_keep_alive_refs ({num_keep_alive_refs}) must be >= 1')
    if max_chunk_length is None:
      options = pybind.AutoTunedChunkerOptions(num_keep_alive_refs, 1.0)
    elif not 1 <= max_chunk_length <= num_keep_alive_refs:
      raise ValueError(
          f'max_chunk_length ({max_chunk_length}) must be in [1, '
          f'num_keep_alive_refs ({num_keep_alive_refs})]')
    else:
      options = pybind.ConstantChunkerOptions(max_chunk_length,
                                              num_keep_alive_refs)
    if path in self._column_index:
      self._writer.ConfigureChunker(self._column_index[path], options)
    else:
      self._column_config[path] = options

  def append(self, data: Any, *, partial_step: bool = False):
    """Appends a step (a nest of arrays; leaves may be None).

    The structure may grow: new fields become new columns, whose history is
    None for the earlier steps. With `partial_step=True` the step stays open
    and later calls fill its other fields.

    Raises:
      ValueError: If a field was already set in the open step, or its dtype
        or shape differs from its first step.
    """
    flat = _tree.flatten_with_path(data)
    if self._template is None or any(
        path not in self._column_index for path, _ in flat):
      self._add_columns(data)
    cells = [None] * len(self._columns)
    for path, value in flat:
      cells[self._column_index[path]] = value
    if self._last_step_is_open:
      for column, value in zip(self._columns, cells):
        if value is not None and not column.can_set_last:
          raise ValueError(
              f'Field {column._path} has already been set in the active '  # pylint: disable=protected-access
              f'step by previous (partial) append call and thus must be '
              f'omitted or set to None but got: {value}')
    try:
      if partial_step:
        references = self._writer.AppendPartial(cells)
      else:
        references = self._writer.Append(cells)
    except ValueError as e:
      raise ValueError(self._name_columns(str(e))) from e
    for column, reference in zip(self._columns, references):
      if not self._last_step_is_open:
        column.append(reference)
      elif reference is not None:
        column.set_last(reference)
    self._last_step_is_open = partial_step

  def append_batch(self, steps: Any):
    """Appends T complete steps given as arrays with a leading dimension T,
    in one call (chunked in C++ without a Python loop over steps).

    Raises:
      ValueError: If the leaves disagree on T, a partial step is open, or a
        field's dtype or shape differs from its first step.
    """
    if self._last_step_is_open:
      raise ValueError('append_batch cannot continue a partial step.')
    flat = [(path, np.asarray(leaf))
            for path, leaf in _tree.flatten_with_path(steps)]
    lengths = {len(leaf) for _, leaf in flat}
    if len(lengths) != 1:
      raise ValueError(
          f'All leaves of a batch need the same leading dimension, got '
          f'{sorted(lengths)}')
    num_steps = lengths.pop()
    if self._template is None or any(
        path not in self._column_index for path, _ in flat):
      self._add_columns(steps)
    columns = [None] * len(self._columns)
    for path, leaf in flat:
      columns[self._column_index[path]] = leaf
    try:
      references = self._writer.AppendBatch(columns)
    except ValueError as e:
      raise ValueError(self._name_columns(str(e))) from e
    for column, cells in zip(self._columns, references):
      column.extend(cells if cells is not None else [None] * num_steps)

  def create_item(self, table: str, priority: float, trajectory: Any):
    """Queues an item of `trajectory`, a nest of `TrajectoryColumn`s.

    Raises:
      TypeError: If a leaf is not a TrajectoryColumn.
      ValueError: If the table is unknown or the trajectory does not match
        its signature (with item validation on), or a cell has expired.
    """
    columns = _tree.flatten(trajectory)
    references = []
    squeeze = []
    for column in columns:
      if (type(column) is not TrajectoryColumn and
          not isinstance(column, TrajectoryColumn)):
        raise TypeError(
            f'All leaves of `trajectory` must be `TrajectoryColumn` but got '
            f'{trajectory}')
      # pylint: disable=protected-access
      references.append(column._data_references)
      squeeze.append(column._squeeze)
      # pylint: enable=protected-access
    if self._get_signature is not None:
      if table not in self._signatures:
        self._signatures[table] = self._get_signature(table)
      if self._signatures[table] is not None:
        _check_item(table, self._signatures[table], trajectory, columns)
    try:
      self._writer.CreateItem(table, priority, references, squeeze)
    except ValueError as e:
      raise ValueError(self._name_columns(str(e), columns)) from e

  def flush(self,
            block_until_num_items: int = 0,
            timeout_ms: Optional[int] = None):
    """Sends pending items; waits until at most `block_until_num_items` are
    unconfirmed.

    Raises:
      ValueError: If `block_until_num_items` < 0.
      DeadlineExceededError: If `timeout_ms` (> 0) passes first; the items
        are still sent in the background.
    """
    if block_until_num_items < 0:
      raise ValueError(
          f'block_until_num_items must be >= 0, got {block_until_num_items}')
    # As dm-reverb: a timeout <= 0 waits forever.
    self._writer.Flush(block_until_num_items,
                       timeout_ms if timeout_ms and timeout_ms > 0 else None)

  def end_episode(self,
                  clear_buffers: bool = True,
                  timeout_ms: Optional[int] = None):
    """Flushes, then starts a new episode (step 0, new id).

    With `clear_buffers` the history is cleared too; otherwise it stays
    usable for items of the next episode.

    Raises:
      DeadlineExceededError: If `timeout_ms` passes before every item is
        confirmed.
    """
    self._writer.EndEpisode(clear_buffers, timeout_ms)
    if clear_buffers:
      for column in self._columns:
        column.reset()
    self._last_step_is_open = False

  def close(self):
    """Stops the writer; unsent items are dropped (flush first)."""
    if self._closed:
      return
    self._closed = True
    self._writer.Close()

  def _add_columns(self, data: Any):
    """Extends the template by the fields of `data` not seen before."""
    structure = _tree.map_structure(lambda _: None, data)
    self._template = (structure if self._template is None else
                      _tree.union(self._template, structure))
    padding = len(self._columns[0]) if self._columns else 0
    for path, _ in _tree.flatten_with_path(self._template):
      if path in self._column_index:
        continue
      index = len(self._columns)
      self._column_index[path] = index
      if path in self._column_config:
        self._writer.ConfigureChunker(index, self._column_config.pop(path))
      self._columns.append(
          _ColumnHistory(path, self._writer.max_num_keep_alive_refs, padding))
    self._history = _tree.map_structure_with_path(
        lambda path, _: self._columns[self._column_index[path]],
        self._template)

  def _name_columns(self, message: str,
                    columns: Optional[Sequence[TrajectoryColumn]] = None) -> str:
    """Replaces "column N" in C++ errors by the column's path."""
    def name(match):
      index = int(match.group(1))
      if columns is not None:
        if index < len(columns):
          return f'column {columns[index]._path}'  # pylint: disable=protected-access
      elif index < len(self._columns):
        return f'column {self._columns[index]._path}'  # pylint: disable=protected-access
      return match.group(0)
    return re.sub(r'column (\d+)', name, message)
