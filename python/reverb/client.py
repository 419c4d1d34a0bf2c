"""Client: talks to a Reverb server (insert, sample, update, inspect).

Beyond dm-reverb: `sample`, `mutate_priorities` and `reset` take an optional
`timeout` (seconds), which holds whatever the server does, and no call
hangs on a server that is gone: without a timeout, a call that cannot
connect within 10 s raises (RuntimeError, UNAVAILABLE), and one whose server
stops answering (a frozen host, a cut network) raises once the channel's
keepalive pings go unanswered (`keepalive_ms`). A client may also spread
over several servers, shards of one replay buffer (docs/sharding.md):
`Client([address, ...])`.
"""

import collections
import functools
import logging
import time
from typing import Any, Dict, Generator, List, Optional, Sequence, Tuple, Union

import numpy as np

from reverb import _tree
from reverb import errors
from reverb import pybind
from reverb import replay_sample
from reverb import reverb_types
from reverb import security as security_lib
from reverb import structured_value
from reverb import structured_writer as structured_writer_lib
from reverb import trajectory_writer as trajectory_writer_lib
from reverb.cc import schema_pb2

# Client.sample asks for at most this many samples ahead of its consumer, per
# shard (so that each shard's requests are as large as one server's).
_MAX_SAMPLES_IN_FLIGHT = 64


def _key_array(keys: Any, what: str) -> np.ndarray:
  """`keys` (1-D, integers >= 0) as a C-ordered uint64 array."""
  array = np.asarray(keys)
  if (array.dtype.kind in 'fO' and not isinstance(keys, np.ndarray) and
      all(isinstance(k, (int, np.integer)) and not isinstance(k, bool)
          for k in keys)):
    # Python ints on both sides of 2**63 (numpy makes floats of them).
    array = np.array([int(k) for k in keys], dtype=np.uint64)
  if array.ndim != 1:
    raise ValueError(f'mutate_priorities: {what} must be 1-D; got shape '
                     f'{array.shape}')
  if array.size == 0:
    return np.empty(0, np.uint64)
  if array.dtype.kind not in 'iu':
    raise TypeError(f'mutate_priorities: {what} must have an integer dtype; '
                    f'got {array.dtype}')
  if array.dtype.kind == 'i' and (array < 0).any():
    raise ValueError(f'mutate_priorities: {what} must not be negative')
  return np.ascontiguousarray(array, dtype=np.uint64)


def _priority_array(priorities: Any) -> np.ndarray:
  """`priorities` (1-D, of a float or integer dtype) as a C-ordered float64
  array."""
  array = np.asarray(priorities)
  if array.ndim != 1:
    raise ValueError('mutate_priorities: priorities must be 1-D; got shape '
                     f'{array.shape}')
  if array.size == 0:
    return np.empty(0, np.float64)
  if array.dtype.kind not in 'fiu':
    raise TypeError('mutate_priorities: priorities must have a float or '
                    f'integer dtype; got {array.dtype}')
  return np.ascontiguousarray(array, dtype=np.float64)


def _timeout_ms(timeout: Optional[float]) -> Optional[int]:
  """Seconds (None or <= 0: no timeout) to milliseconds for the bindings."""
  if timeout is None or timeout <= 0:
    return None
  return max(1, int(timeout * 1000))


def _flat_arrays(data: Any) -> List[np.ndarray]:
  return [np.asarray(leaf) for leaf in _tree.flatten(data)]


# (tensorflow.DataType value, shape) of each column of a step.
_StepSpec = Tuple[Tuple[int, Tuple[int, ...]], ...]


def _step_spec(arrays: Sequence[np.ndarray]) -> _StepSpec:
  return tuple((structured_value.data_type(a.dtype), a.shape) for a in arrays)


def _check_item(table: str, signature: structured_value.FlatSignature,
                steps: Sequence[_StepSpec]):
  """Raises ValueError (dm-reverb's texts) unless every step of an item
  matches `signature` (each column's spec describes one step, or the whole
  trajectory). Steps are checked newest first: "timestep offset" 0 is the
  last step."""
  specs = signature.specs
  for offset, step in enumerate(reversed(steps)):
    if len(step) != len(specs):
      raise ValueError(
          f"Unable to CreateItem in table '{table}' because Append was called "
          'with a tensor signature inconsistent with table signature.  Append '
          f'for timestep offset {offset} was called with {len(step)} tensors, '
          f'but table requires {len(specs)} tensors per entry.  Table '
          f'signature: {structured_value.describe_specs(signature.named_specs)}'
          f', data signature: {_describe_step(step)}.')
    for index, ((dtype, shape), (_, spec_dtype, spec_shape)) in enumerate(
        zip(step, specs)):
      if dtype == spec_dtype and (
          structured_value.shapes_compatible(spec_shape, shape) or
          structured_value.shapes_compatible(spec_shape,
                                             (len(steps),) + shape)):
        continue
      name, _, _ = signature.named_specs[index]
      raise ValueError(
          f"Unable to CreateItem in table '{table}' because Append was called "
          'with a tensor signature inconsistent with the table signature. At '
          f'timestep offset {offset}, flattened index {index}, saw a tensor of '
          f'dtype {structured_value.data_type_name(dtype)}, shape '
          f'{structured_value.shape_string(shape)}, but expected tensor '
          f"'{name}' of dtype {structured_value.data_type_name(spec_dtype)} "
          'and shape compatible with '
          f'{structured_value.shape_string(spec_shape)}.  (Flattened) table '
          f'signature: {structured_value.describe_specs(signature.named_specs)}'
          f', data signature: {_describe_step(step)}.')


def _describe_step(step: _StepSpec) -> str:
  return structured_value.describe_specs(
      [('', dtype, shape) for dtype, shape in step])


def _decode_tables(
    serialized: Sequence[bytes]) -> Dict[str, reverb_types.TableInfo]:
  """TableInfos by table name, from the serialized protos of a server."""
  infos = {}
  for proto in serialized:
    info = reverb_types.TableInfo.from_serialized_proto(proto)
    infos[info.name] = info
  return infos


class Writer:
  """Legacy writer (`Client.writer`): steps in, items over the last steps.

  To be replaced by `Client.trajectory_writer`, as in dm-reverb. Use it as a
  context manager (exit flushes and closes) or call `close()`.
  """

  # How long create_item waits for a connection to fetch a table's
  # signature before it holds the item, to be checked by flush.
  _CONNECT_WAIT_MS = 250

  def __init__(self, internal_writer: pybind.Writer, client: 'Client',
               max_sequence_length: int, max_held_items: int = 25):
    self._writer = internal_writer
    self._client = client
    # Dtypes and shapes of the last steps, to check items against signatures.
    self._steps = collections.deque(maxlen=max_sequence_length)
    # Items created while their table's signature could not be fetched
    # without waiting for the server: (table, step specs or None), in order.
    # The internal writer holds them (and all later items) until checked.
    self._held: List[Tuple[str, Optional[List[_StepSpec]]]] = []
    self._max_held_items = max_held_items
    self._closed = False

  def __enter__(self) -> 'Writer':
    if self._closed:
      raise ValueError('Cannot reuse already closed Writer')
    return self

  def __exit__(self, *_):
    try:
      self.flush()
    except BaseException:
      # The stream has failed; there is nothing left to close cleanly.
      self._closed = True
      raise
    self.close()

  def __repr__(self) -> str:
    return f'{self._writer!r}, closed: {self._closed}'

  def __del__(self):
    if not getattr(self, '_closed', True):
      logging.warning(
          'Writer-object deleted without calling .close explicitly.')
      try:
        # A finalizer runs wherever the garbage collector does: it does not
        # wait for a server that is not there (close() would, for up to
        # 10 s, to check the items held for want of one: they are dropped).
        if self._held and not self._writer.Connected(0):
          logging.error('Dropping %d items held for a server that is not '
                        'connected.', len(self._held))
          self._drop_held()
        self.close()
      except Exception:  # pylint: disable=broad-except
        logging.exception('Closing the writer failed.')

  def append(self, data: Any):
    """Appends one step: a nest of arrays (flattened as dm-tree does)."""
    arrays = _flat_arrays(data)
    self._writer.Append(arrays)
    self._steps.append(_step_spec(arrays))

  def append_sequence(self, sequence: Any):
    """Appends T steps: every leaf has the leading dimension T."""
    arrays = _flat_arrays(sequence)
    self._writer.AppendSequence(arrays)
    if len(arrays[0]):  # A sequence of no steps appends none.
      step = _step_spec([a[0] for a in arrays])
      self._steps.extend([step] * min(len(arrays[0]), self._steps.maxlen))

  def create_item(self, table: str, num_timesteps: int, priority: float):
    """Inserts an item over the last `num_timesteps` appended steps.

    The item is checked against the table's signature, fetched once from
    the server. If the writer is not connected (within 250 ms), the item
    is held, with every item after it, and checked by the next `flush` or
    `close` (within their timeout), or once `max_in_flight_items` items
    are held (waiting for the server as `server_info` does): so create_item
    never waits long for a server, and `flush(timeout)` bounds the two.

    Raises:
      TypeError: If `table` is not a str.
      ValueError: If the table does not exist, the data does not match its
        signature, or the arguments are out of range.
      RuntimeError: If items are held and the server does not answer within
        10 s.
    """
    if num_timesteps < 1:
      raise ValueError(
          f'num_timesteps ({num_timesteps}) must be a positive integer')
    if not isinstance(table, str):
      raise TypeError(f'Table names are str, got {table!r}.')
    steps = (list(self._steps)[-num_timesteps:]
             if num_timesteps <= len(self._steps) else None)
    if not self._held and (
        table in self._client._signature_cache or  # pylint: disable=protected-access
        self._writer.Connected(self._CONNECT_WAIT_MS)):
      self._check(table, steps)
      self._writer.CreateItem(table, num_timesteps, priority)
      return
    self._writer.CreateItem(table, num_timesteps, priority, hold=True)
    self._held.append((table, steps))
    if len(self._held) >= self._max_held_items or self._writer.Connected():
      self._release_held(None)

  def _check(self, table: str, steps: Optional[List[_StepSpec]],
             timeout: Optional[float] = None):
    signature = self._client._flat_signature(table, timeout)  # pylint: disable=protected-access
    if signature is not None and steps is not None:
      _check_item(table, signature, steps)

  def _release_held(self, timeout: Optional[float]):
    """Checks the held items (fetching signatures within `timeout`), then
    lets the internal writer send those that pass; raises the first check's
    ValueError once it has. On a timeout or UNAVAILABLE the items stay
    held."""
    deadline = None if timeout is None else time.monotonic() + timeout
    keep, first_error = [], None
    for table, steps in self._held:
      left = None if deadline is None else deadline - time.monotonic()
      if left is not None and left <= 0:
        raise errors.DeadlineExceededError(
            f'Timeout exceeded with {len(self._held)} items waiting to be '
            'written and 0 items awaiting confirmation.')
      try:
        self._check(table, steps, left)
        keep.append(True)
      except errors.DeadlineExceededError:
        raise errors.DeadlineExceededError(
            f'Timeout exceeded with {len(self._held)} items waiting to be '
            'written and 0 items awaiting confirmation.') from None
      except (TypeError, ValueError) as e:
        keep.append(False)
        first_error = first_error or e
    self._held = []
    self._writer.ReleaseHeldItems(keep)
    if first_error is not None:
      raise first_error

  def flush(self, timeout: Optional[float] = None):
    """Sends pending items and waits for the server to confirm them all.

    Raises:
      DeadlineExceededError: If `timeout` (seconds) passes first.
      ValueError: If an item held by create_item does not match its table's
        signature (it is dropped; the others are sent).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    if self._held:
      self._release_held(timeout)
    self._writer.Flush(_timeout_ms(
        None if deadline is None else max(1e-3, deadline - time.monotonic())))

  def close(self, retry_on_unavailable: bool = True,
            timeout: Optional[float] = None):
    """Flushes and ends the stream. A second call raises ValueError."""
    del retry_on_unavailable  # Transient errors are already retried.
    if self._closed:
      raise ValueError('close() has already been called on Writer.')
    self._closed = True
    if self._held:
      try:
        self._release_held(timeout)
      except BaseException:
        # Neither checked nor sent: dropped with the stream.
        self._drop_held()
        self._writer.Close(_timeout_ms(timeout))
        raise
    self._writer.Close(_timeout_ms(timeout))

  def _drop_held(self):
    """Lets the internal writer drop every held item, unchecked and unsent."""
    self._writer.ReleaseHeldItems([False] * len(self._held))
    self._held = []


class Client:
  """A connection to a Reverb server at `server_address` ("host:port", or
  "unix:PATH" for its unix domain socket), or to the shards of one replay
  buffer at a sequence of addresses.

  Over several shards (docs/sharding.md): writers write each to one shard
  at a time and move to another if it dies, samples are drawn from all of
  them with the table's distribution over all their items, `server_info`
  merges the shards' tables (`shard_info` keeps them apart),
  `mutate_priorities` sends the keys this client sampled recently to their
  shards and the others to every shard, and `reset` and `checkpoint` act
  on every shard.

  `keepalive_ms` (not in dm-reverb): how often the client pings a server
  whose connection has been quiet, in milliseconds; a server that leaves a
  ping unanswered as long is taken for gone, and the calls waiting on it
  raise RuntimeError (UNAVAILABLE): about 2 * keepalive_ms after it stops
  answering. None: the environment variable REVERB_KEEPALIVE_MS, else
  10000; 0: no pings (calls without a timeout then wait on a frozen server
  forever, as dm-reverb's). dm-reverb servers refuse pings more frequent
  than every 5 minutes on a connection that carries no data: clients that
  wait on one for long need 300000 or more (or 0).

  `tls` and `auth_token` (not in dm-reverb; `reverb.security`): the
  `reverb.TlsOptions` that verify the server (and the client's certificate
  for mutual TLS), and the token every call carries; one set for all
  shards. Absent, the REVERB_TLS_* and REVERB_AUTH_TOKEN variables. A
  token the server refuses raises RuntimeError ("Unauthenticated: wrong
  auth token ...", or "no auth token"), and so does a TLS handshake that
  fails ("Unauthenticated: the TLS handshake ... failed: " and the cause:
  a certificate that does not verify, TLS required or not offered), at
  once, without retries.

  Raises:
    ValueError: If no address is given, an address is empty, or one is
      given twice, `keepalive_ms` is negative, or a certificate file cannot
      be read.
  """

  def __init__(self, server_address: Union[str, Sequence[str]], *,
               keepalive_ms: Optional[int] = None,
               tls: Optional[security_lib.TlsOptions] = None,
               auth_token: Optional[str] = None):
    self._server_address = server_address
    self._keepalive_ms = keepalive_ms
    self._tls = tls
    self._auth_token = auth_token
    self._client = pybind.Client(
        server_address, keepalive_ms,
        security_lib.channel_security(tls, auth_token))
    self._max_samples_in_flight = _MAX_SAMPLES_IN_FLIGHT * (
        1 if isinstance(server_address, str) else len(server_address))
    self._signature_cache: Dict[str, Any] = {}
    self._flat_signatures: Dict[str, structured_value.FlatSignature] = {}
    self._tables_state_id = None
    # Idle streams kept for the next call, so that `insert` and `sample`
    # skip the call setup: legacy writers of one step, and sample streams by
    # table. (list.append and list.pop are atomic: threads may share them.)
    self._insert_writers: List[pybind.Writer] = []
    self._sample_streams: Dict[str, List[pybind.SampleStream]] = (
        collections.defaultdict(list))

  def __reduce__(self):
    return functools.partial(
        self.__class__, keepalive_ms=self._keepalive_ms, tls=self._tls,
        auth_token=self._auth_token), (
        self._server_address,)

  def __repr__(self) -> str:
    return f'Client, server_address={self._server_address}'

  @property
  def server_address(self) -> Union[str, Sequence[str]]:
    """The address, or the addresses, given to the constructor."""
    return self._server_address

  def insert(self, data: Any, priorities: Dict[str, float]):
    """Inserts `data` (one step) as one item in each table of `priorities`.

    The data is sent and stored once, whatever the number of tables.

    Raises:
      ValueError: If `priorities` is empty.
    """
    if not priorities:
      raise ValueError('priorities must contain at least one item')
    arrays = _flat_arrays(data)
    for table, _ in priorities.items():
      signature = self._flat_signature(table)
      if signature is not None:
        _check_item(table, signature, [_step_spec(arrays)])
    try:
      idle_writer = self._insert_writers.pop()
    except IndexError:
      idle_writer = None
    if idle_writer is not None:
      try:
        self._insert_once(idle_writer, arrays, priorities)
        return
      except RuntimeError:
        # The idle writer's stream had broken (e.g. the server restarted):
        # try once more on a new stream.
        pass
    self._insert_once(self._new_insert_writer(), arrays, priorities)

  def _new_insert_writer(self) -> pybind.Writer:
    return self._client.NewWriter(chunk_length=1, max_timesteps=1,
                                  delta_encoded=False,
                                  max_in_flight_items=1_000_000)

  def _insert_once(self, writer: pybind.Writer, arrays: List[np.ndarray],
                   priorities: Dict[str, float]):
    """One step, one item per table, flushed; `writer` is kept for the next
    insert only if all went well (otherwise it is dropped, its stream
    cancelled)."""
    writer.InsertStep(arrays, list(priorities.items()))
    writer.NewEpisode()
    self._insert_writers.append(writer)

  def writer(self,
             max_sequence_length: int,
             delta_encoded: bool = False,
             chunk_length: Optional[int] = None,
             max_in_flight_items: Optional[int] = 25) -> Writer:
    """A legacy `Writer` whose items span at most `max_sequence_length` steps.

    Args:
      max_sequence_length: Longest item, in steps.
      delta_encoded: Store integer data as differences between steps.
      chunk_length: Steps per chunk; defaults to min(10, max_sequence_length).
      max_in_flight_items: Unconfirmed items allowed before writes wait;
        None means 1,000,000.

    Raises:
      ValueError: If an argument is out of range.
    """
    if max_sequence_length < 1:
      raise ValueError(f'max_sequence_length ({max_sequence_length}) must be '
                       'a positive integer')
    if chunk_length is None:
      chunk_length = min(10, max_sequence_length)
    if chunk_length < 1 or chunk_length > max_sequence_length:
      raise ValueError(
          f'chunk_length ({chunk_length}) must be a positive integer le to '
          f'max_sequence_length ({max_sequence_length})')
    if max_in_flight_items is None:
      max_in_flight_items = 1_000_000
    if max_in_flight_items < 1:
      raise ValueError(f'max_in_flight_items ({max_in_flight_items}) must be '
                       'a positive integer')
    return Writer(self._client.NewWriter(
        chunk_length=chunk_length,
        max_timesteps=max_sequence_length,
        delta_encoded=delta_encoded,
        max_in_flight_items=max_in_flight_items), self, max_sequence_length,
                  min(max_in_flight_items, 25))

  def trajectory_writer(
      self,
      num_keep_alive_refs: int,
      *,
      validate_items: bool = True) -> trajectory_writer_lib.TrajectoryWriter:
    """A `TrajectoryWriter` whose history keeps `num_keep_alive_refs` steps.

    Args:
      num_keep_alive_refs: Steps of history items can reference.
      validate_items: Check items against the tables' signatures before
        sending them (fetches them from the server first: RuntimeError if
        it cannot be reached within 10 s).

    Raises:
      ValueError: If `num_keep_alive_refs` < 1.
      RuntimeError: If validating and the server does not answer.
    """
    if num_keep_alive_refs < 1:
      raise ValueError(
          f'num_keep_alive_refs ({num_keep_alive_refs}) must be a positive '
          f'integer')
    get_signature = None
    if validate_items:
      self._table_infos(None)
      get_signature = self._flat_signature
    return trajectory_writer_lib.TrajectoryWriter(
        self._client.NewTrajectoryWriter(
            pybind.AutoTunedChunkerOptions(num_keep_alive_refs, 1.0)),
        get_signature)

  def structured_writer(
      self, configs: Sequence[structured_writer_lib.Config]
  ) -> structured_writer_lib.StructuredWriter:
    """A `StructuredWriter` inserting the items `configs` describe.

    Raises:
      ValueError: If `configs` is empty or a config is invalid.
    """
    return structured_writer_lib.make_writer(self._client, configs)

  def sample(
      self,
      table: str,
      num_samples: int = 1,
      *,
      emit_timesteps: bool = True,
      unpack_as_table_signature: bool = False,
      timeout: Optional[float] = None,
  ) -> Generator[Union[List[replay_sample.ReplaySample],
                       replay_sample.ReplaySample], None, None]:
    """Yields `num_samples` samples of `table`.

    Args:
      table: Table to sample from.
      num_samples: Number of samples (-1, as in dm-reverb, yields none).
      emit_timesteps: Yield each sample as a list of `ReplaySample`, one per
        timestep (all columns must have the same length, and none may be
        squeezed); otherwise yield one `ReplaySample` holding whole columns.
      unpack_as_table_signature: Shape the data as the table's signature
        (fetched with `server_info`); tables without one give flat lists.
      timeout: Seconds to wait for each sample, whatever the server does
        (None: as long as a live server's rate limiter holds it back, as
        dm-reverb).

    Raises:
      DeadlineExceededError: If a sample does not arrive within `timeout`
        (about a second more if the server does not answer at all).
      RuntimeError: If the server cannot be reached (UNAVAILABLE): not
        within 10 s, or it stopped answering (see `keepalive_ms`).
      ValueError: If `num_samples` is 0 or < -1, the table is unknown (with
        unpack_as_table_signature) or the columns' lengths differ (with
        emit_timesteps).
      TypeError: If a column is squeezed (with emit_timesteps).
    """
    if num_samples == -1:
      # dm-reverb opens an unlimited sampler and reads none of it.
      return
    if num_samples < 1:
      raise ValueError(f'max_samples ({num_samples}) must be -1 or >= 1')
    signature = None
    if unpack_as_table_signature:
      signatures = self._known_signatures(table)
      if table not in signatures:
        raise ValueError(
            f'Could not find table "{table}". The following tables exists: '
            f'{", ".join(signatures)}.')
      signature = signatures[table]
    timeout_ms = _timeout_ms(timeout)
    deadline = None if timeout_ms is None else time.monotonic() + timeout
    streams = self._sample_streams[table]
    reused = bool(streams)
    stream = (streams.pop() if reused else
              self._client.NewSampleStream(table, timeout_ms))
    yielded = 0
    try:
      while yielded < num_samples:
        if stream.outstanding == 0:
          try:
            stream.Request(
                min(num_samples - yielded, self._max_samples_in_flight),
                timeout_ms)
            sample = stream.Read()
          except RuntimeError:
            if not reused or yielded:
              raise
            # An idle stream the server has dropped (e.g. it restarted):
            # try once more on a new one, within what is left of `timeout`.
            reused = False
            left_ms = None if deadline is None else max(
                1, int((deadline - time.monotonic()) * 1000))
            stream = self._client.NewSampleStream(table, left_ms)
            continue
        else:
          sample = stream.Read()
        info, columns, _ = sample
        info = replay_sample.SampleInfo(*info)
        yielded += 1
        if emit_timesteps:
          # As dm-reverb: columns of one length are split along it (a
          # squeezed column raises TypeError: it has no len()).
          lengths = {len(c) for c in columns}
          if len(lengths) != 1:
            raise ValueError(
                "Can't split non timestep trajectory into timesteps.")
          yield [
              replay_sample.ReplaySample(
                  info, self._shape(signature, [c[t, ...] for c in columns]))
              for t in range(lengths.pop())
          ]
        else:
          yield replay_sample.ReplaySample(info, self._shape(signature, columns))
    finally:
      # Reuse the stream only if nothing requested is left unread.
      if stream.ok and stream.outstanding == 0:
        streams.append(stream)
      else:
        stream.Cancel()

  @staticmethod
  def _shape(signature: Any, flat: List[np.ndarray]) -> Any:
    return flat if signature is None else _tree.unflatten_as(signature, flat)

  def _known_signatures(self, table: str,
                        timeout: Optional[float] = None) -> Dict[str, Any]:
    """The signature of every table (None where it has none), in the
    server's order; fetched again if `table` is not among them."""
    if table not in self._signature_cache:
      self._table_infos(timeout)
    return self._signature_cache

  def _signature(self, table: str, timeout: Optional[float] = None) -> Any:
    """The signature of `table` (None if it has none), fetched once.

    Raises:
      TypeError: If `table` is not a str.
      ValueError: If the server has no such table.
    """
    if not isinstance(table, str):
      raise TypeError(f'Table names are str, got {table!r}.')
    signatures = self._known_signatures(table, timeout)
    if table not in signatures:
      raise ValueError(
          f'Unable to find signatures for table \'{table}\' in signature '
          f'cache.  Available tables: {list(signatures)}.')
    return signatures[table]

  def _flat_signature(
      self, table: str,
      timeout: Optional[float] = None) -> Optional[structured_value.FlatSignature]:
    """`_signature(table)` flattened for item validation (once per
    signature), or None if the table has none."""
    signature = self._signature(table, timeout)
    if signature is None:
      return None
    flat = self._flat_signatures.get(table)
    if flat is None or flat.signature is not signature:
      flat = structured_value.FlatSignature(signature)
      self._flat_signatures[table] = flat
    return flat

  def mutate_priorities(
      self,
      table: str,
      updates: Optional[Union[Dict[int, float],
                              Tuple[np.ndarray, np.ndarray]]] = None,
      deletes: Optional[Union[List[int], np.ndarray]] = None,
      *,
      timeout: Optional[float] = None):
    """Updates priorities and deletes items (deletes first); unknown keys
    are ignored (so over several shards, each key changes on the shard that
    holds it; a shard that is down is skipped).

    `updates` is a dict {key: priority}, as in dm-reverb, or (beyond
    dm-reverb) a pair `(keys, priorities)` of 1-D arrays of one length:
    keys of an integer dtype (`info.key` of samples is uint64), priorities
    of a float or integer dtype; `deletes` a list of keys or a 1-D integer
    array. Arrays are sent without a Python object per key (much faster for
    large batches); the result is the same as the dict's. A key given twice
    gets the later priority.

    Raises:
      ValueError: For a NaN or negative priority the table's sampler
        rejects (the others are applied), arrays that are not 1-D or differ
        in length, or negative keys.
      TypeError: For arrays of another dtype.
    """
    if not isinstance(updates, tuple) and not isinstance(deletes, np.ndarray):
      self._client.MutatePriorities(
          table, list((updates or {}).items()), list(deletes or []),
          _timeout_ms(timeout))
      return
    if updates is None:
      keys, priorities = _key_array([], 'keys'), _priority_array([])
    elif isinstance(updates, tuple) and len(updates) == 2:
      keys, priorities = _key_array(updates[0], 'keys'), _priority_array(
          updates[1])
    elif isinstance(updates, tuple):
      raise ValueError('updates must be a dict or a pair (keys, priorities); '
                       f'got a tuple of {len(updates)}')
    else:
      keys, priorities = _key_array(list(updates.keys()), 'keys'), (
          _priority_array(list(updates.values())))
    if keys.shape != priorities.shape:
      raise ValueError(f'mutate_priorities got {keys.size} keys and '
                       f'{priorities.size} priorities')
    self._client.MutatePrioritiesArrays(
        table, keys, priorities,
        _key_array([] if deletes is None else deletes, 'deletes'),
        _timeout_ms(timeout))

  def reset(self, table: str, *, timeout: Optional[float] = None):
    """Removes every item of `table` and resets its rate limiter (on every
    shard; RuntimeError for a shard that is down, once the others are
    reset)."""
    self._client.Reset(table, _timeout_ms(timeout))

  def server_info(
      self, timeout: Optional[int] = None
  ) -> Dict[str, reverb_types.TableInfo]:
    """Options and state of every table of the server (signatures are
    `tf.TensorSpec`s whenever TensorFlow can be imported, see `TableInfo`).

    Over several shards: each table as the shards that answered report it,
    with sizes and counts summed (`shard_info` has them one by one).

    Args:
      timeout: Seconds to wait for the server; None or <= 0: 10 s, then
        RuntimeError (UNAVAILABLE).

    Raises:
      DeadlineExceededError: If the server does not answer within `timeout`.
      RuntimeError: Without a timeout, if the server does not answer within
        10 s.
    """
    try:
      serialized = self._table_infos(timeout)
    except errors.DeadlineExceededError:
      raise errors.DeadlineExceededError(
          'ServerInfo call did not complete within provided timeout of '
          f'{timeout}s') from None
    return _decode_tables(serialized)

  def shard_info(
      self, timeout: Optional[float] = None
  ) -> Dict[str, Union[Dict[str, reverb_types.TableInfo], Exception]]:
    """`server_info` of each shard, asked in parallel, by address (in the
    order of the addresses; one address gives one entry).

    A shard that fails does not fail the call: its entry is the exception
    its `server_info` would raise instead (`DeadlineExceededError` if it did
    not answer within `timeout`). Over several shards, one the client knows
    to be down (its background refresh could not reach it) gets a
    `RuntimeError` at once, and so does one that goes down during the call.

    Args:
      timeout: Seconds to wait for each shard; None or <= 0: 10 s, after
        which a shard that has not answered gets a RuntimeError
        (UNAVAILABLE).
    """
    addresses = self._server_address
    if isinstance(addresses, str):
      addresses = [addresses]
    shards = self._client.ShardInfo(_timeout_ms(timeout))
    return {
        address: shard if isinstance(shard, Exception) else
        _decode_tables(shard[1])
        for address, shard in zip(addresses, shards)
    }

  def _table_infos(self, timeout: Optional[float]) -> List[bytes]:
    """The server's serialized TableInfos; refills the signature cache when
    its tables changed (decoding never imports TensorFlow: the cache serves
    item validation and unpacking, which only read dtypes, shapes and
    structure)."""
    state_id, serialized = self._client.ServerInfo(_timeout_ms(timeout))
    if state_id != self._tables_state_id:
      signatures = {}
      for proto in serialized:
        info = schema_pb2.TableInfo.FromString(proto)
        signatures[info.name] = (structured_value.decode(info.signature)
                                 if info.HasField('signature') else None)
      self._tables_state_id = state_id
      self._signature_cache = signatures
    return serialized

  def checkpoint(self, *, timeout: Optional[float] = None
                ) -> Union[str, List[str]]:
    """Asks the server to save its tables; returns the directory written
    (a client made from a sequence of addresses gets a list: each shard's
    directory, in the order of the addresses; the first error if one
    fails).

    Raises:
      DeadlineExceededError: If `timeout` (seconds; None: no limit) passes
        first (the save still completes on the server).
    """
    paths = self._client.Checkpoint(_timeout_ms(timeout))
    return paths[0] if isinstance(self._server_address, str) else paths
