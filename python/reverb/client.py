"""Client: talks to a Reverb server (insert, sample, update, inspect).

Beyond dm-reverb: `sample`, `mutate_priorities` and `reset` take an optional
`timeout` (seconds), and every call raises instead of hanging when the server
is gone.
"""

import logging
from typing import Any, Dict, Generator, List, Optional, Union

import numpy as np

from reverb import _tree
from reverb import pybind
from reverb import replay_sample
from reverb import reverb_types

# Per-stream sample budget of Client.sample (its generator asks for at most
# this many samples ahead of the consumer).
_MAX_SAMPLES_IN_FLIGHT = 64


def _timeout_ms(timeout: Optional[float]) -> Optional[int]:
  """Seconds (None or <= 0: no timeout) to milliseconds for the bindings."""
  if timeout is None or timeout <= 0:
    return None
  return max(1, int(timeout * 1000))


def _flat_arrays(data: Any) -> List[np.ndarray]:
  return [np.asarray(leaf) for leaf in _tree.flatten(data)]


class Writer:
  """Legacy writer (`Client.writer`): steps in, items over the last steps.

  To be replaced by `Client.trajectory_writer`, as in dm-reverb. Use it as a
  context manager (exit flushes and closes) or call `close()`.
  """

  def __init__(self, internal_writer: pybind.Writer):
    self._writer = internal_writer
    self._closed = False

  def __enter__(self) -> 'Writer':
    if self._closed:
      raise ValueError('Cannot reuse already closed Writer')
    return self

  def __exit__(self, *_):
    self.flush()
    self.close()

  def __del__(self):
    if not getattr(self, '_closed', True):
      logging.warning(
          'Writer-object deleted without calling .close explicitly.')
      try:
        self.close()
      except Exception:  # pylint: disable=broad-except
        logging.exception('Closing the writer failed.')

  def append(self, data: Any):
    """Appends one step: a nest of arrays (flattened as dm-tree does)."""
    self._writer.Append(_flat_arrays(data))

  def append_sequence(self, sequence: Any):
    """Appends T steps: every leaf has the leading dimension T."""
    self._writer.AppendSequence(_flat_arrays(sequence))

  def create_item(self, table: str, num_timesteps: int, priority: float):
    """Inserts an item over the last `num_timesteps` appended steps."""
    if num_timesteps < 1:
      raise ValueError(f'num_timesteps ({num_timesteps}) must be >= 1')
    self._writer.CreateItem(table, num_timesteps, priority)

  def flush(self, timeout: Optional[float] = None):
    """Sends pending items and waits for the server to confirm them all.

    Raises:
      DeadlineExceededError: If `timeout` (seconds) passes first.
    """
    self._writer.Flush(_timeout_ms(timeout))

  def close(self, retry_on_unavailable: bool = True,
            timeout: Optional[float] = None):
    """Flushes and ends the stream. A second call raises ValueError."""
    del retry_on_unavailable  # Transient errors are already retried.
    if self._closed:
      raise ValueError('close() has already been called on Writer.')
    self._closed = True
    self._writer.Close(_timeout_ms(timeout))


class Client:
  """A connection to a Reverb server at `server_address` ("host:port")."""

  def __init__(self, server_address: str):
    self._server_address = server_address
    self._client = pybind.Client(server_address)
    self._signature_cache: Dict[str, Any] = {}
    self._tables_state_id = None

  def __reduce__(self):
    return self.__class__, (self._server_address,)

  def __repr__(self) -> str:
    return f'Client, server_address={self._server_address}'

  @property
  def server_address(self) -> str:
    return self._server_address

  def insert(self, data: Any, priorities: Dict[str, float]):
    """Inserts `data` (one step) as one item in each table of `priorities`.

    The data is sent and stored once, whatever the number of tables.

    Raises:
      ValueError: If `priorities` is empty.
    """
    if not priorities:
      raise ValueError('priorities must contain at least one item')
    with self.writer(max_sequence_length=1) as writer:
      writer.append(data)
      for table, priority in priorities.items():
        writer.create_item(table=table, num_timesteps=1, priority=priority)

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
      raise ValueError(
          f'max_sequence_length ({max_sequence_length}) must be >= 1')
    if chunk_length is None:
      chunk_length = min(10, max_sequence_length)
    if chunk_length < 1 or chunk_length > max_sequence_length:
      raise ValueError(
          f'chunk_length ({chunk_length}) must be a positive integer le to '
          f'max_sequence_length ({max_sequence_length})')
    if max_in_flight_items is None:
      max_in_flight_items = 1_000_000
    if max_in_flight_items < 1:
      raise ValueError(
          f'max_in_flight_items ({max_in_flight_items}) must be >= 1')
    return Writer(self._client.NewWriter(
        chunk_length=chunk_length,
        max_timesteps=max_sequence_length,
        delta_encoded=delta_encoded,
        max_in_flight_items=max_in_flight_items))

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
      num_samples: Number of samples.
      emit_timesteps: Yield each sample as a list of `ReplaySample`, one per
        timestep (all columns must have the same length); otherwise yield one
        `ReplaySample` holding whole columns.
      unpack_as_table_signature: Shape the data as the table's signature
        (fetched with `server_info`); tables without one give flat lists.
      timeout: Seconds to wait for each sample (None: forever, as dm-reverb).

    Raises:
      DeadlineExceededError: If a sample does not arrive within `timeout`.
      ValueError: If the table is unknown (with unpack_as_table_signature)
        or the sample cannot be split into timesteps.
    """
    if num_samples < 1:
      raise ValueError(f'num_samples ({num_samples}) must be >= 1')
    signature = None
    if unpack_as_table_signature:
      signature = self._signature(table)
    timeout_ms = _timeout_ms(timeout)
    sampler = self._client.NewSampler(
        table,
        max_samples=num_samples,
        max_in_flight_samples_per_worker=min(num_samples,
                                             _MAX_SAMPLES_IN_FLIGHT),
        num_workers=1,
        max_samples_per_stream=-1,
        rate_limiter_timeout_ms=timeout_ms)
    try:
      for _ in range(num_samples):
        info, columns, timesteps = sampler.GetNextTrajectory(timeout_ms)
        info = replay_sample.SampleInfo(*info)
        if emit_timesteps:
          if timesteps < 0:
            raise ValueError(
                "Can't split non timestep trajectory into timesteps.")
          yield [
              replay_sample.ReplaySample(
                  info, self._shape(signature, [c[t] for c in columns]))
              for t in range(timesteps)
          ]
        else:
          yield replay_sample.ReplaySample(info, self._shape(signature, columns))
    finally:
      sampler.Close()

  @staticmethod
  def _shape(signature: Any, flat: List[np.ndarray]) -> Any:
    return flat if signature is None else _tree.unflatten_as(signature, flat)

  def _signature(self, table: str) -> Any:
    if table not in self._signature_cache:
      self.server_info()
    if table not in self._signature_cache:
      raise ValueError(
          f'Could not find table "{table}". Available tables: '
          f'{sorted(self._signature_cache)}')
    return self._signature_cache[table]

  def mutate_priorities(self,
                        table: str,
                        updates: Optional[Dict[int, float]] = None,
                        deletes: Optional[List[int]] = None,
                        *,
                        timeout: Optional[float] = None):
    """Updates priorities and deletes items (deletes first); unknown keys
    are ignored."""
    self._client.MutatePriorities(
        table, list((updates or {}).items()), list(deletes or []),
        _timeout_ms(timeout))

  def reset(self, table: str, *, timeout: Optional[float] = None):
    """Removes every item of `table` and resets its rate limiter."""
    self._client.Reset(table, _timeout_ms(timeout))

  def server_info(
      self, timeout: Optional[int] = None
  ) -> Dict[str, reverb_types.TableInfo]:
    """Options and state of every table of the server.

    Args:
      timeout: Seconds to wait for the server; None or <= 0 waits forever.

    Raises:
      DeadlineExceededError: If the server does not answer in time.
    """
    state_id, serialized = self._client.ServerInfo(_timeout_ms(timeout))
    infos = {}
    for proto in serialized:
      info = reverb_types.TableInfo.from_serialized_proto(proto)
      infos[info.name] = info
    if state_id != self._tables_state_id:
      self._tables_state_id = state_id
      self._signature_cache = {
          name: info.signature for name, info in infos.items()}
    return infos

  def checkpoint(self) -> str:
    """Asks the server to save its tables; returns the directory written."""
    return self._client.Checkpoint()
