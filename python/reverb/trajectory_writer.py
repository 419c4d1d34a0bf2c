"""TrajectoryWriter: append steps, then insert items over any recent cells.

Each leaf of the appended structure is a column. `history` mirrors the
structure; indexing a column's history (`[-1]`, `[-3:]`, `[[0, 2]]`) gives a
`TrajectoryColumn` of cell references, and `create_item` inserts a nest of
such columns. Cells are chunked per column in C++ and streamed in the
background: `append` and `create_item` do not wait for the server;
`flush` and `end_episode` do (with optional timeouts).

As in dm-reverb, the writer drives an internal writer (`pybind.
TrajectoryWriter`, or any object with its interface) through `Append(cells)`,
`AppendPartial(cells)`, `CreateItem(table, priority, refs_per_column,
squeeze_per_column)`, `Flush(block_until_num_items, timeout_ms)` (-1: no
timeout), `EndEpisode(clear_buffers, timeout_ms)`, `ConfigureChunker(column,
options)`, `Close()`, `episode_steps` and `max_num_keep_alive_refs`, all
called positionally; the history holds exactly the references `Append` and
`AppendPartial` return.

Beyond dm-reverb: `append_batch` appends T steps given with a leading time
dimension in one call, and `create_items` queues N items in one call, the
last the trajectory given, each earlier one the same trajectory one step
earlier (e.g. one item per step of an `append_batch`).
"""

import collections
import itertools
import operator
import re
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from reverb import _tree
from reverb import errors
from reverb import pybind
from reverb import structured_value

Path = Tuple[Union[int, str], ...]

# The structure before the first append.
_NO_STEPS = object()


class TrajectoryColumn:
  """Cells of one column, to be inserted as (part of) an item.

  Args:
    data_references: Cell references (`pybind.WeakCellRef`), oldest first.
    squeeze: Insert the single cell without a time dimension.
    path: Where the column comes from, for error messages.
    origin: The `_ColumnHistory` the cells come from and their steps in it,
      for `TrajectoryWriter.create_items` (None: not from a history).

  Raises:
    ValueError: If squeezed with other than one cell, or a cell is None
      (expired from the history, or never set).
  """

  __slots__ = ('_data_references', 'is_squeezed', '_path', '_origin')

  def __init__(self,
               data_references: Sequence[pybind.WeakCellRef],
               *,
               squeeze: bool = False,
               path: Optional[Path] = None,
               origin: Optional[Tuple['_ColumnHistory', Sequence[int]]] = None):
    if squeeze and len(data_references) != 1:
      raise ValueError(
          f'Columns must contain exactly one data reference when squeeze '
          f'set, got {len(data_references)}')
    if any(ref is None for ref in data_references):
      raise ValueError(
          f'TrajectoryColumns cannot contain any None data references: '
          f'TrajectoryColumn at path {path} got {data_references}.')
    # A list: create_item hands it to the internal writer as it is.
    self._data_references = list(data_references)
    self.is_squeezed = squeeze
    self._path = path
    self._origin = origin

  def __len__(self) -> int:
    return len(self._data_references)

  def __iter__(self) -> Iterator[pybind.WeakCellRef]:
    return iter(self._data_references)

  def __getitem__(self, val) -> 'TrajectoryColumn':
    """A column of some of the cells: `[i]` squeezed, `[a:b]`, `[[i, j]]`.

    Raises:
      IndexError: If an index is out of range.
      TypeError: If `val` is none of these (numpy integers work too).
    """
    if isinstance(val, slice):
      return TrajectoryColumn(self._data_references[val],
                              origin=self._sub_origin(val))
    if isinstance(val, list):
      return TrajectoryColumn([self._cell(i) for i in val],
                              origin=self._sub_origin(val))
    try:
      index = operator.index(val)
    except TypeError:
      raise TypeError(f'TrajectoryColumn indices must be integers or slices, '
                      f'not {type(val)}') from None
    return TrajectoryColumn([self._cell(index)], squeeze=True,
                            origin=self._sub_origin([index]))

  def _sub_origin(self, val: Union[slice, List[int]]):
    if self._origin is None:
      return None
    history, steps = self._origin
    return history, (list(steps[val]) if isinstance(val, slice) else
                     [steps[i] for i in val])

  def _cell(self, index: int) -> pybind.WeakCellRef:
    references = self._data_references
    if not -len(references) <= index < len(references):
      # dm-reverb's message (it keeps the references in a tuple).
      raise IndexError('tuple index out of range')
    return references[index]

  @property
  def shape(self) -> Tuple[Optional[int], ...]:
    cell_shape = tuple(self._data_references[0].shape)
    return cell_shape if self.is_squeezed else (len(self),) + cell_shape

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
    return arrays[0] if self.is_squeezed else np.stack(arrays)


class _ColumnHistory:
  """The cells of one column in this episode, step by step: the last
  `buffer_size` are kept, older (and never set) ones read None.

  Indexing is a list's over the steps, except that positions before the
  first step read None (as an expired step does, which makes the column
  raise ValueError), as in dm-reverb.
  """

  def __init__(self, path: Path, buffer_size: int, history_padding: int = 0):
    self._path = path
    self._references = collections.deque(maxlen=buffer_size)
    for _ in range(min(buffer_size, history_padding)):
      self._references.append(None)
    self._length = history_padding

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

  def __iter__(self) -> Iterator[Optional[pybind.WeakCellRef]]:
    """The reference of every step (None where expired or never set)."""
    yield from itertools.repeat(None, self._length - len(self._references))
    yield from self._references

  def _reference(self, index: int) -> Optional[pybind.WeakCellRef]:
    if index >= self._length:
      raise IndexError('list index out of range')
    if index < 0:
      index += self._length
    first_kept = self._length - len(self._references)
    return None if index < first_kept else self._references[index - first_kept]

  def _slice(self, val: slice) -> range:
    """The steps of a slice: positions before step 0 (from a start below
    -len) are negative."""
    step = 1 if val.step is None else operator.index(val.step)
    if step < 0:
      return range(*val.indices(self._length))
    if step == 0:
      raise ValueError('slice step cannot be zero')
    length = self._length
    start = 0 if val.start is None else operator.index(val.start)
    start = start + length if start < 0 else min(start, length)
    stop = length if val.stop is None else operator.index(val.stop)
    stop = stop + length if stop < 0 else min(stop, length)
    return range(start, stop, step)

  def _column(self, steps: Sequence[int], *, squeeze: bool = False,
              path: Path) -> TrajectoryColumn:
    # Positions before step 0 read None.
    return TrajectoryColumn(
        [self._reference(i) if i >= 0 else None for i in steps],
        squeeze=squeeze, path=path, origin=(self, steps))

  def window(self, column: TrajectoryColumn,
             num_items: int) -> Tuple[List[pybind.WeakCellRef], List[int]]:
    """The cells of `num_items` items of `column`'s steps, the last at those
    steps and each earlier one a step earlier: (the cells from the first
    item's first step to the last item's last, the offset of each of the
    first item's cells in them; item i's are i later).

    Raises:
      ValueError: If the column is not (or no longer) of this history's
        steps, or a step the items need has expired, precedes the first or
        was never set.
    """
    steps = column._origin[1]  # pylint: disable=protected-access
    if any(step >= self._length or self._reference(step) is not reference
           for step, reference in zip(steps, column)):
      raise ValueError(
          f'The column at path {column._path} no longer reads the steps it '  # pylint: disable=protected-access
          f'was indexed from (they expired, or the episode ended since).')
    first = min(steps) - (num_items - 1)
    first_kept = self._length - len(self._references)
    if first < max(0, first_kept):
      raise ValueError(
          f'{num_items} items of the column at path {column._path} need its '  # pylint: disable=protected-access
          f'steps from {first} on, but its history holds steps '
          f'{max(0, first_kept)} to {self._length - 1}.')
    cells = list(itertools.islice(self._references, first - first_kept,
                                  max(steps) + 1 - first_kept))
    if any(cell is None for cell in cells):
      raise ValueError(
          f'TrajectoryColumns cannot contain any None data references: '
          f'{num_items} items of the column at path {column._path} need its '  # pylint: disable=protected-access
          f'steps {first} to {max(steps)}, and some were never set.')
    return cells, [step - first - (num_items - 1) for step in steps]

  def __getitem__(self, val) -> TrajectoryColumn:
    """A column of some steps: `[i]` squeezed, `[a:b]`, `[[i, j]]`.

    Raises:
      IndexError: If an index is past the last step.
      TypeError: If `val` is none of these (numpy integers work too).
      ValueError: If a step asked for has expired or was never set.
    """
    if type(val) is int:  # The common case (one per column and item), inlined.
      references = self._references
      if -len(references) <= val < 0:
        column = TrajectoryColumn.__new__(TrajectoryColumn)
        column._data_references = [references[val]]
        if column._data_references[0] is not None:
          column.is_squeezed = True
          column._path = self._path + (val,)
          column._origin = (self, (self._length + val,))
          return column
    path = self._path + (val,)
    if isinstance(val, slice):
      return self._column(self._slice(val), path=path)
    if isinstance(val, list):
      return self._column([i + self._length if i < 0 else i for i in val],
                          path=path)
    try:
      index = operator.index(val)
    except TypeError:
      raise TypeError(f'_ColumnHistory indices must be integers or slices, '
                      f'not {type(val)}') from None
    if index >= self._length:
      raise IndexError('list index out of range')
    return self._column([index + self._length if index < 0 else index],
                        squeeze=True, path=path)


def _signature_mismatch(table: str,
                        signature: structured_value.FlatSignature,
                        columns: Sequence[TrajectoryColumn]) -> Optional[str]:
  """dm-reverb's message if the columns do not match the table's signature,
  else None.

  Raises:
    RuntimeError: If a column's first cell has expired.
    IndexError: If a column is empty.
  """
  specs = signature.specs
  if len(specs) == len(columns):
    for column, (_, spec_data_type, spec_shape) in zip(columns, specs):
      if (structured_value.data_type(column.dtype) != spec_data_type or
          not structured_value.shapes_compatible(spec_shape, column.shape)):
        break
    else:
      return None
  # The error path: spell both signatures out as dm-reverb does.
  got = [(structured_value.data_type(column.dtype), column.shape)
         for column in columns]
  wanted = signature.named_specs
  provided = [(str(i), data_type, shape)
              for i, (data_type, shape) in enumerate(got)]
  describe = structured_value.describe_specs

  def tensor(data_type, shape):
    return (f'{structured_value.data_type_name(data_type)} '
            f'{structured_value.shape_string(shape)}')

  prefix = (f"Unable to create item in table '{table}' since the provided "
            f'trajectory is inconsistent with the table signature.')
  if len(wanted) != len(provided):
    return (f'{prefix} The trajectory has {len(provided)} columns but the '
            f'table signature has {len(wanted)} columns.\n\nThe table '
            f'signature is:\n\t{describe(wanted)}\n\nThe provided '
            f'trajectory signature was:\n\t{describe(provided)}.\n')
  for i, ((_, want_type, want_shape), (_, got_type, got_shape)) in enumerate(
      zip(wanted, provided)):
    if (want_type != got_type or
        not structured_value.shapes_compatible(want_shape, got_shape)):
      return (f'{prefix} The table expects column {i} to be a '
              f'{tensor(want_type, want_shape)} tensor but got a '
              f'{tensor(got_type, got_shape)} tensor.\n\nThe table '
              f'signature is:\n\t{describe(wanted)}\n\nThe provided '
              f'trajectory signature is:\n\t{describe(provided)}.\n')
  return None


class TrajectoryWriter:
  """Writes steps and items of recent cells (see the module docstring).

  Made by `Client.trajectory_writer`. Use as a context manager to flush on
  exit, and call `close()` when done.

  Args:
    internal_writer: The `pybind.TrajectoryWriter` (or an object with its
      interface, see the module docstring).
    get_signature: Item validation: table name -> its `FlatSignature` (None
      if it has none); raises ValueError for an unknown table. None: items
      are not validated.
  """

  def __init__(self,
               internal_writer: pybind.TrajectoryWriter,
               get_signature: Optional[Callable[[str], Any]] = None):
    self._writer = internal_writer
    self._get_signature = get_signature
    self._signatures: Dict[str, Optional[structured_value.FlatSignature]] = {}
    # Union of the appended structures, None leaves.
    self._structure = _NO_STEPS
    self._history = None  # The structure with _ColumnHistory leaves.
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
    """The appended structure (the union of all steps' structures), each
    leaf the `_ColumnHistory` of its column.

    Raises:
      RuntimeError: Before the first append.
    """
    if not self._columns:
      raise RuntimeError(
          'history cannot be accessed before `append` is called at least '
          'once.')
    return self._history

  @property
  def episode_steps(self) -> int:
    """Complete steps appended since the episode began."""
    return self._writer.episode_steps

  def configure(self, path: Path, *, num_keep_alive_refs: int,
                max_chunk_length: Optional[int]):
    """Chunking of the column at `path` (as from flatten_with_path).

    `max_chunk_length=None` tunes the chunk length automatically.

    Raises:
      ValueError: If `num_keep_alive_refs` < 1, or `max_chunk_length` is
        not None and outside [1, num_keep_alive_refs].
    """
    if num_keep_alive_refs < 1:
      raise ValueError(
          f'num_keep_alive_refs ({num_keep_alive_refs}) must be a positive '
          f'integer')
    if max_chunk_length is not None and not (
        1 <= max_chunk_length <= num_keep_alive_refs):
      raise ValueError(
          f'max_chunk_length ({max_chunk_length}) must be None or a positive '
          f'integer <= num_keep_alive_refs ({num_keep_alive_refs})')
    if max_chunk_length is None:
      options = pybind.AutoTunedChunkerOptions(
          num_keep_alive_refs=num_keep_alive_refs, throughput_weight=1.0)
    else:
      options = pybind.ConstantChunkerOptions(
          max_chunk_length=max_chunk_length,
          num_keep_alive_refs=num_keep_alive_refs)
    if path in self._column_index:
      self._writer.ConfigureChunker(self._column_index[path], options)
    else:
      self._column_config[path] = options

  def append(self, data: Any, *, partial_step: bool = False):
    """Appends a step (a nest of arrays; leaves may be None).

    The structure may grow: a step may bring new dict keys or longer lists
    and tuples (at any depth), which become new columns whose history reads
    None for the earlier steps; fields a step omits read None for it. With
    `partial_step=True` the step stays open and later calls fill (or add)
    its other fields.

    Raises:
      ValueError: If a field was already set in the open step, its dtype or
        shape differs from its first step, or the structure cannot grow
        into the new one (a leaf where a nest was, or the reverse).
    """
    flat = _tree.flatten_with_path(data)
    if self._structure is _NO_STEPS:
      self._add_columns(data)
    try:
      cells = self._cells(flat)
    except KeyError:  # A field not seen before: the structure grows.
      self._add_columns(data)
      cells = self._cells(flat)
    if self._last_step_is_open:
      for column, value in zip(self._columns, cells):
        if value is not None and not column.can_set_last:
          raise ValueError(
              f'Field {column._path} has already been set in the active '  # pylint: disable=protected-access
              f'step by previous (partial) append call and thus must be '
              f'omitted or set to None but got: {value}')
    references = self._call_writer(
        self._writer.AppendPartial if partial_step else self._writer.Append,
        cells)
    for column, reference in zip(self._columns, references):
      if not self._last_step_is_open:
        column.append(reference)
      elif reference is not None:
        column.set_last(reference)
    self._last_step_is_open = partial_step

  def append_batch(self, steps: Any):
    """Appends T complete steps given as arrays with a leading dimension T,
    in one call (chunked in C++ without a Python loop over steps). Not in
    dm-reverb; needs the `pybind.TrajectoryWriter`.

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
    if self._structure is _NO_STEPS or any(
        path not in self._column_index for path, _ in flat):
      self._add_columns(steps)
    columns = [None] * len(self._columns)
    for path, leaf in flat:
      columns[self._column_index[path]] = leaf
    references = self._call_writer(self._writer.AppendBatch, columns)
    for column, cells in zip(self._columns, references):
      column.extend(cells if cells is not None else [None] * num_steps)

  def create_item(self, table: str, priority: float, trajectory: Any):
    """Queues an item of `trajectory`, a nest of `TrajectoryColumn`s.

    Raises:
      TypeError: If a leaf is not a TrajectoryColumn.
      ValueError: If the trajectory has no cells, a column's cells have
        expired or differ in dtype or shape, or (with item validation) the
        table is unknown or the trajectory does not match its signature.
      RuntimeError: If the writer is closed.
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
      references.append(column._data_references)  # pylint: disable=protected-access
      squeeze.append(column.is_squeezed)
    if self._get_signature is not None:
      self._check_signature(table, columns, references, squeeze)
    self._writer.CreateItem(table, priority, references, squeeze)

  def create_items(self, table: str, *, priorities: Any, trajectory: Any):
    """Queues `len(priorities)` items in one call (not in dm-reverb; needs the
    `pybind.TrajectoryWriter`).

    The last item is what `create_item(table, priorities[-1], trajectory)`
    would queue; each earlier one is the same trajectory one step earlier,
    every column shifted back along its history. So, after T steps,
    `create_items(table, priorities=np.ones(T), trajectory={'obs':
    history['obs'][-1]})` queues an item of each of the T steps, in step
    order, and `history['obs'][-3:]` instead the last 3 steps of each. The
    trajectory's columns must come from indexing `history` (then may be
    indexed further). The signature is checked once for all items; either
    every item is queued or (on error) none is.

    Args:
      table: The table to insert into.
      priorities: One float per item, oldest item first (a sequence or a
        1-D array).
      trajectory: A nest of `TrajectoryColumn`s, the last item.

    Raises:
      TypeError: If a leaf is not a TrajectoryColumn.
      ValueError: If `priorities` is not 1-D or holds a NaN, a column is not
        (or no longer) of the history, a step the items need has expired,
        precedes the episode's first step or was never set, or for what
        `create_item` raises ValueError for (same messages).
      RuntimeError: If the writer is closed.
    """
    priorities = np.asarray(priorities, dtype=np.float64)
    if priorities.ndim != 1:
      raise ValueError(
          f'priorities must be one-dimensional (one per item), got shape '
          f'{priorities.shape}')
    num_items = len(priorities)
    columns = _tree.flatten(trajectory)
    references, offsets, squeeze = [], [], []
    for column in columns:
      if not isinstance(column, TrajectoryColumn):
        raise TypeError(
            f'All leaves of `trajectory` must be `TrajectoryColumn` but got '
            f'{trajectory}')
      if column._origin is None:  # pylint: disable=protected-access
        raise ValueError(
            f'create_items needs columns indexed from the history, but the '
            f'column at path {column._path} was made otherwise.')  # pylint: disable=protected-access
      if len(column) and num_items:
        cells, column_offsets = column._origin[0].window(column, num_items)  # pylint: disable=protected-access
      else:  # Nothing to shift: CreateItems reports an empty column.
        cells, column_offsets = [], []
      references.append(cells)
      offsets.append(column_offsets)
      squeeze.append(column.is_squeezed)
    if self._get_signature is not None:  # The last item's stands for all.
      self._check_signature(
          table, columns,
          [column._data_references for column in columns],  # pylint: disable=protected-access
          squeeze)
    self._writer.CreateItems(table, priorities, references, offsets, squeeze)

  def flush(self,
            block_until_num_items: int = 0,
            timeout_ms: Optional[int] = None):
    """Sends pending items; waits until at most `block_until_num_items` are
    unconfirmed.

    Args:
      block_until_num_items: Items that may stay unconfirmed.
      timeout_ms: Milliseconds to wait at most; None or <= 0 waits forever.

    Raises:
      ValueError: If `block_until_num_items` < 0.
      DeadlineExceededError: If `timeout_ms` passes first; the items are
        still sent in the background.
    """
    if block_until_num_items < 0:
      raise ValueError(
          f'block_until_num_items must be >= 0, got {block_until_num_items}')
    # As dm-reverb: no timeout is -1, and its "timeout" is reported too.
    timeout_ms = -1 if timeout_ms is None else timeout_ms
    with errors.writer_call_timeout('Flush', timeout_ms):
      self._writer.Flush(block_until_num_items, timeout_ms)

  def end_episode(self,
                  clear_buffers: bool = True,
                  timeout_ms: Optional[int] = None):
    """Flushes, then starts a new episode (step 0, new id).

    With `clear_buffers` the history is cleared too; otherwise it stays
    usable for items of the next episode.

    Args:
      clear_buffers: Whether to clear the history.
      timeout_ms: Milliseconds to wait at most (<= 0: not at all); None
        waits forever.

    Raises:
      DeadlineExceededError: If `timeout_ms` passes before every item is
        confirmed; the episode then goes on (nothing is reset).
    """
    with errors.writer_call_timeout('End episode', timeout_ms):
      self._writer.EndEpisode(clear_buffers, timeout_ms)
    if clear_buffers:
      for column in self._columns:
        column.reset()
    self._last_step_is_open = False

  def close(self):
    """Stops the writer; unsent items are dropped (flush first). Later calls
    raise RuntimeError."""
    if self._closed:
      return
    self._closed = True
    self._writer.Close()

  def _check_signature(self, table: str,
                       columns: Sequence[TrajectoryColumn],
                       references: List[List[pybind.WeakCellRef]],
                       squeeze: List[bool]):
    """Raises ValueError unless `table` exists and the columns match its
    signature; errors of the columns themselves (expired or mixed cells, a
    closed writer) come first, as in dm-reverb."""
    if table not in self._signatures:
      try:
        self._signatures[table] = self._get_signature(table)
      except ValueError:
        self._writer.CheckTrajectory(references, squeeze)
        raise ValueError(
            f"Unable to create item in table '{table}' since the table could "
            f'not be found.') from None
    signature = self._signatures[table]
    if signature is None:
      return
    try:
      mismatch = _signature_mismatch(table, signature, columns)
    except (RuntimeError, IndexError):  # Expired or empty: CheckTrajectory.
      mismatch = None
      self._writer.CheckTrajectory(references, squeeze)
    if mismatch is not None:
      self._writer.CheckTrajectory(references, squeeze)
      raise ValueError(mismatch)

  def _add_columns(self, data: Any):
    """Extends the structure by the fields of `data` not seen before.

    Raises:
      ValueError: If `data` has a leaf where the structure has a nest, or
        the reverse.
    """
    structure = _tree.map_structure(lambda _: None, data)
    self._structure = (structure if self._structure is _NO_STEPS else
                       _tree.union(self._structure, structure))
    padding = len(self._columns[0]) if self._columns else 0
    for path, _ in _tree.flatten_with_path(self._structure):
      if path in self._column_index:
        continue
      index = len(self._columns)
      self._column_index[path] = index
      # Configured first, so that the history keeps as many steps as the
      # column's chunker does (dm-reverb's keeps the writer's default).
      if path in self._column_config:
        self._writer.ConfigureChunker(index, self._column_config.pop(path))
      self._columns.append(
          _ColumnHistory(path, self._writer.max_num_keep_alive_refs, padding))
    self._history = _tree.map_structure_with_path(
        lambda path, _: self._columns[self._column_index[path]],
        self._structure)

  def _cells(self, flat: Sequence[Tuple[Path, Any]]) -> List[Any]:
    """A step's values by column (None for columns it omits); KeyError for
    a path that is not a column yet."""
    column_index = self._column_index
    cells = [None] * len(self._columns)
    for path, value in flat:
      cells[column_index[path]] = value
    return cells

  def _call_writer(self, append: Callable[[Any], Any], columns: Any) -> Any:
    """`append(columns)` on the internal writer, its ValueErrors saying "for
    column N" naming the column's path instead, as dm-reverb's (when the
    message names exactly one column)."""
    try:
      return append(columns)
    except ValueError as e:
      indices = re.findall(r' for column (\d+)', str(e))
      if len(indices) != 1 or int(indices[0]) >= len(self._columns):
        raise
      path = self._columns[int(indices[0])]._path  # pylint: disable=protected-access
      raise ValueError(str(e).replace(f' for column {indices[0]}',
                                      f' for column {path}')) from e
