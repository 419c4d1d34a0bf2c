"""TrajectoryDataset: a tf.data.Dataset of whole items sampled from a table.

Each element is a `ReplaySample(info, data)`: `info` holds the five scalars
of `SampleInfo`, `data` every column of the item (with its time dimension).
Importing this module imports TensorFlow; see `reverb/_datasets.py` for how
the dataset is built (an op on TensorFlow's stable C API, any TensorFlow
2.x).
"""

import functools
from typing import Any, Optional

from reverb import _datasets
from reverb import _tree
from reverb import client as client_lib

tf = _datasets.import_tensorflow()


class TrajectoryDataset(tf.data.Dataset):
  """A `tf.data.Dataset` sampling whole items of `table`.

  Elements are `ReplaySample(info=SampleInfo(...), data=<dtypes/shapes
  nest>)`. Each iterator opens its own streams. Iteration ends after
  `max_samples` samples, or once the rate limiter holds a request longer
  than `rate_limiter_timeout_ms`.

  `dataset.batch(n)` (items of fully known shapes, no parallel calls) asks
  the sampler for n samples at a time instead of batching single samples:
  the same elements, one copy less.

  Args:
    server_address: "host:port" of the server.
    table: Table to sample from.
    dtypes: Nest of `tf.DType`s of the item's columns.
    shapes: Nest (as `dtypes`) of the columns' shapes.
    max_in_flight_samples_per_worker: Samples each stream asks for ahead.
    num_workers_per_iterator: Streams per iterator; -1 means 1.
    max_samples_per_stream: Samples before a stream is replaced; -1: never.
    rate_limiter_timeout_ms: See above; -1 waits forever.
    max_samples: See above; -1 means no limit.

  Raises:
    ValueError: For out-of-range arguments or `dtypes`/`shapes` of
      different structures. A table signature or sampled data that does not
      match raises `tf.errors.InvalidArgumentError` during iteration.
    ImportError: If the op library cannot be loaded.
  """

  _EMIT_TIMESTEPS = False

  def __init__(self,
               server_address: str,
               table: str,
               dtypes: Any,
               shapes: Any,
               max_in_flight_samples_per_worker: int = 100,
               num_workers_per_iterator: int = -1,
               max_samples_per_stream: int = -1,
               rate_limiter_timeout_ms: int = -1,
               max_samples: int = -1):
    _datasets.check_arguments(max_in_flight_samples_per_worker,
                              num_workers_per_iterator, max_samples_per_stream,
                              rate_limiter_timeout_ms, max_samples)
    self._spec = _datasets.element_spec(tf, dtypes, shapes)
    # sample_rows(batch_size=..., ...) for this table and these options.
    self._sample_rows = functools.partial(
        _datasets.sample_rows, tf, server_address, table, self._spec,
        self._EMIT_TIMESTEPS,
        dict(max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
             num_workers_per_iterator=num_workers_per_iterator,
             max_samples_per_stream=max_samples_per_stream,
             rate_limiter_timeout_ms=rate_limiter_timeout_ms,
             max_samples=max_samples))
    self._dataset = self._sample_rows().unbatch()
    super().__init__(self._dataset._variant_tensor)  # pylint: disable=protected-access

  @property
  def element_spec(self):
    return self._dataset.element_spec

  def _inputs(self):
    return []

  def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None,
            deterministic=None, name=None):
    if (self._EMIT_TIMESTEPS or num_parallel_calls is not None or
        not isinstance(batch_size, int) or batch_size < 1 or
        not all(s.shape.is_fully_defined()
                for s in _tree.flatten(self._spec))):
      return super().batch(batch_size, drop_remainder, num_parallel_calls,
                           deterministic, name)
    return self._sample_rows(batch_size=batch_size, fill_timeout_ms=-1,
                             drop_remainder=drop_remainder)

  @classmethod
  def from_table_signature(cls,
                           server_address: str,
                           table: str,
                           max_in_flight_samples_per_worker: int,
                           num_workers_per_iterator: int = -1,
                           max_samples_per_stream: int = -1,
                           rate_limiter_timeout_ms: int = -1,
                           get_signature_timeout_secs: Optional[int] = None,
                           max_samples: int = -1):
    """A dataset whose dtypes and shapes are the table's signature.

    Raises:
      ValueError: If the table does not exist or has no signature.
      DeadlineExceededError: If the server does not answer within
        `get_signature_timeout_secs`.
    """
    infos = client_lib.Client(server_address).server_info(
        get_signature_timeout_secs)
    if table not in infos:
      raise ValueError(
          f'Server at {server_address} does not contain any table named '
          f'{table}. Found: {", ".join(sorted(infos))}.')
    signature = infos[table].signature
    if not signature:
      raise ValueError(
          f'Table {table} at {server_address} does not have a signature.')
    # TensorFlow is loaded, so the signature holds tf.TensorSpecs.
    dtypes = _tree.map_structure(lambda spec: spec.dtype, signature)
    shapes = _tree.map_structure(lambda spec: spec.shape, signature)
    return cls(server_address, table, dtypes=dtypes, shapes=shapes,
               max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
               num_workers_per_iterator=num_workers_per_iterator,
               max_samples_per_stream=max_samples_per_stream,
               rate_limiter_timeout_ms=rate_limiter_timeout_ms,
               max_samples=max_samples)

