"""ReplayIterator: batches of samples as numpy arrays, without TensorFlow.

For PyTorch (yield from it in an `IterableDataset`), JAX or plain numpy
learners: C++ worker threads keep `max_in_flight_samples_per_worker`
samples (more if small) in flight per stream and decompress them straight
into their rows of a batch, all without the GIL. Each batch is a
`ReplaySample` whose `info` fields and data leaves are arrays with a leading
batch dimension.

  with reverb.ReplayIterator('localhost:8000', 'replay', batch_size=32) as it:
    for batch in it:
      learn(batch.data, batch.info.key, batch.info.probability)
"""

from typing import Any, Optional, Sequence, Union

from reverb import _tree
from reverb import client as client_lib
from reverb import errors
from reverb import pybind
from reverb import replay_sample
from reverb import security as security_lib


class ReplayIterator:
  """Iterates over batches sampled from `table` (see the module docstring).

  Args:
    server_address: "host:port" (or "unix:PATH") of the server, or a
      sequence of the addresses of shards (docs/sharding.md).
    table: Table to sample from.
    batch_size: Samples per batch; the last batch may be smaller when
      `max_samples` is reached or the rate limiter times out. Samples are
      stacked, so their trajectories must have equal shapes.
    max_in_flight_samples_per_worker: Samples each stream asks for ahead,
      at least: small samples get more, as many as
      `max_in_flight_bytes_per_worker` hold (by the average size of the
      last few hundred), up to 10 times this many (80 times while the
      consumer waits for samples), so that each message carries more of
      them.
    max_in_flight_bytes_per_worker: See above; 0: exactly
      `max_in_flight_samples_per_worker`.
    num_workers: Parallel streams (and decompressing threads).
    max_samples_per_stream: Samples before a stream is replaced (spreads
      load over servers behind one address); -1: never.
    rate_limiter_timeout_ms: Iteration ends once the table cannot serve a
      sample for this long; -1: wait forever.
    max_samples: Iteration ends after this many samples; -1: never.
    unpack_as_table_signature: Shape the data as the table's signature (if
      it has one); otherwise data is a flat list of columns.
    keepalive_ms: As `Client`'s: a server that stops answering is taken for
      gone after about 2 * keepalive_ms; the iterator then reconnects for
      10 s before it raises RuntimeError (UNAVAILABLE).
    tls, auth_token: As `Client`'s.

  Raises:
    ValueError: For out-of-range arguments, an unknown table (when
      unpacking as the signature), or addresses no `Client` takes.
    RuntimeError: When unpacking as the signature, if the server cannot be
      reached within 10 s.
  """

  def __init__(self,
               server_address: Union[str, Sequence[str]],
               table: str,
               batch_size: int,
               *,
               max_in_flight_samples_per_worker: int = 100,
               max_in_flight_bytes_per_worker: int = 4 << 20,
               num_workers: int = 1,
               max_samples_per_stream: int = -1,
               rate_limiter_timeout_ms: int = -1,
               max_samples: int = -1,
               unpack_as_table_signature: bool = True,
               keepalive_ms: Optional[int] = None,
               tls: Optional[security_lib.TlsOptions] = None,
               auth_token: Optional[str] = None):
    if batch_size < 1:
      raise ValueError(f'batch_size ({batch_size}) must be >= 1')
    client = client_lib.Client(server_address, keepalive_ms=keepalive_ms,
                               tls=tls, auth_token=auth_token)
    self._signature = None
    if unpack_as_table_signature:
      self._signature = client._signature(table)  # pylint: disable=protected-access
    self._batch_size = batch_size
    self._sampler = client._client.NewSampler(  # pylint: disable=protected-access
        table,
        max_samples=max_samples,
        max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
        max_in_flight_bytes_per_worker=max_in_flight_bytes_per_worker,
        num_workers=num_workers,
        max_samples_per_stream=max_samples_per_stream,
        rate_limiter_timeout_ms=(rate_limiter_timeout_ms
                                 if rate_limiter_timeout_ms >= 0 else None),
        # Samples are decompressed straight into their batch rows.
        unpack_ahead=False)
    self._timed_out = False

  def __iter__(self) -> 'ReplayIterator':
    return self

  def __next__(self) -> replay_sample.ReplaySample:
    if self._timed_out:
      raise StopIteration
    try:
      info, columns = self._sampler.GetNextBatch(self._batch_size, None)
    except errors.DeadlineExceededError:
      # The rate limiter held a request past rate_limiter_timeout_ms.
      self._timed_out = True
      raise StopIteration from None
    data: Any = columns
    if self._signature is not None:
      data = _tree.unflatten_as(self._signature, columns)
    return replay_sample.ReplaySample(replay_sample.SampleInfo(*info), data)

  def close(self):
    """Stops the workers; samples in flight are dropped."""
    self._sampler.Close()

  def __enter__(self) -> 'ReplayIterator':
    return self

  def __exit__(self, *_):
    self.close()

  def __del__(self):
    sampler: Optional[pybind.Sampler] = getattr(self, '_sampler', None)
    if sampler is not None:
      sampler.Close()
