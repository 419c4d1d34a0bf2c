"""TrajectoryDataset: a tf.data.Dataset of whole items sampled from a table.

Each element is a `ReplaySample(info, data)`: `info` holds the five scalars
of `SampleInfo`, `data` every column of the item (with its time dimension).
Importing this module imports TensorFlow; see `reverb/_datasets.py` for how
the dataset is built (an op on TensorFlow's stable C API, any TensorFlow
2.x).
"""

import functools
from typing import Any, Optional, Sequence, Union

from reverb import _datasets
from reverb import _tree
from reverb import client as client_lib

tf = _datasets.import_tensorflow()


class _DeferredDataset(tf.compat.v1.data.Dataset):
  """A dataset whose pipeline is built when it is first used (iterated or
  transformed), in the graph (or eagerly) where the object was made.

  Building a tf.data map registers a function with TensorFlow's runtime,
  which initializes it; deferring that lets users make a dataset, then
  configure devices (`tf.config.set_logical_device_configuration`), then
  use it.

  Args:
    build: Makes the (v2) dataset.
    spec: Its element spec.
  """

  def __init__(self, build, spec):
    self._build = build
    self._spec_of_elements = spec
    self._built = None
    self._made_eagerly = tf.executing_eagerly()
    self._made_in = tf.compat.v1.get_default_graph()
    super().__init__()

  def _as_variant_tensor(self):
    return None  # See _variant_tensor.

  @property
  def _variant_tensor(self):
    if self._built is None:
      if self._made_eagerly:
        with tf.init_scope():
          self._built = self._build()
      else:
        with self._made_in.as_default():
          self._built = self._build()
    return self._built._variant_tensor  # pylint: disable=protected-access

  @property
  def element_spec(self):
    return self._spec_of_elements

  def _inputs(self):
    return []


class TrajectoryDataset(_DeferredDataset):
  """A `tf.data.Dataset` sampling whole items of `table`.

  Elements are `ReplaySample(info=SampleInfo(...), data=<dtypes/shapes
  nest>)`. Each iterator opens its own streams. Iteration ends after
  `max_samples` samples, or once the rate limiter holds a request longer
  than `rate_limiter_timeout_ms`.

  `dataset.batch(n)` (items of fully known shapes, no parallel calls) asks
  the sampler for n samples at a time instead of batching single samples:
  the same elements, one copy less.

  As dm-reverb's, it is a `tf.compat.v1.data.Dataset`, so TF1-style graph
  code can call `make_one_shot_iterator()` and
  `make_initializable_iterator()` on it; in TF2 it is an ordinary dataset.

  Args:
    server_address: "host:port" (or "unix:PATH") of the server, or a
      sequence of the addresses of shards (docs/sharding.md): strings, or a
      string tensor (a scalar or a vector).
    table: Table to sample from (a string or a string tensor).
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
               server_address: Any,
               table: Any,
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
    _datasets.load_ops(tf)  # ImportError now rather than on first use.
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
    super().__init__(lambda: self._sample_rows().unbatch(), self._spec)

  def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None,
            deterministic=None, name=None):
    if (self._EMIT_TIMESTEPS or num_parallel_calls is not None or
        not isinstance(batch_size, int) or batch_size < 1 or
        not all(s.shape.is_fully_defined()
                for s in _tree.flatten(self._spec))):
      return super().batch(batch_size, drop_remainder, num_parallel_calls,
                           deterministic, name)
    rows = tf.TensorShape([batch_size if drop_remainder else None])
    return _DeferredDataset(
        lambda: self._sample_rows(
            batch_size=batch_size, fill_timeout_ms=-1,
            drop_remainder=drop_remainder, nest_rows=True).unbatch(),
        tf.nest.map_structure(
            lambda s: tf.TensorSpec(rows.concatenate(s.shape), s.dtype),
            self._spec))

  @classmethod
  def from_table_signature(cls,
                           server_address: Union[str, Sequence[str]],
                           table: str,
                           max_in_flight_samples_per_worker: int,
                           num_workers_per_iterator: int = -1,
                           max_samples_per_stream: int = -1,
                           rate_limiter_timeout_ms: int = -1,
                           get_signature_timeout_secs: Optional[int] = None,
                           max_samples: int = -1):
    """A dataset whose dtypes and shapes are the table's signature (over
    several shards, as the shards that answer report it).

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

