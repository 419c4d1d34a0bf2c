"""TFClient: Reverb calls as TensorFlow ops (eager, tf.function, sessions).

Built on `tf.numpy_function` over our client, so it works with any
TensorFlow 2.x and needs no op library. Importing this module imports
TensorFlow.
"""

from typing import Any, List

import numpy as np

from reverb import _datasets
from reverb import pybind
from reverb import replay_sample

tf = _datasets.import_tensorflow()


def _text(value: Any) -> str:
  """A string tensor's value as numpy_function hands it over."""
  if isinstance(value, np.ndarray):
    value = value.item()
  return value.decode() if isinstance(value, bytes) else str(value)


class TFClient:
  """Client ops for graphs: `sample`, `insert`, `update_priorities`."""

  def __init__(self, server_address: str, shared_name: str = None,
               name: str = None):
    del shared_name, name  # One client per Python object.
    self._server_address = server_address
    self._client = None

  def _get_client(self) -> pybind.Client:
    if self._client is None:
      self._client = pybind.Client(self._server_address)
    return self._client

  def sample(self, table: Any, data_dtypes: List[Any],
             name: str = None) -> replay_sample.ReplaySample:
    """The first timestep of one item sampled from `table` (the whole item
    if its columns cannot be split into timesteps); blocks until the rate
    limiter allows.

    Returns:
      ReplaySample(info, data) where data is a list of tensors of
      `data_dtypes`.
    """
    del name
    dtypes = [tf.dtypes.as_dtype(d) for d in data_dtypes]

    def sample_fn(table_name):
      sampler = self._get_client().NewSampler(
          _text(table_name), max_samples=1, max_in_flight_samples_per_worker=1)
      try:
        info, columns, timesteps = sampler.GetNextTrajectory(None)
      finally:
        sampler.Close()
      if len(columns) != len(dtypes):
        raise ValueError(
            f'Sampled {len(columns)} columns but {len(dtypes)} dtypes were '
            'given.')
      values = [np.uint64(info[0]), np.float64(info[1]), np.int64(info[2]),
                np.float64(info[3]), np.int32(info[4])]
      # The first timestep; items of squeezed or unequal columns whole.
      first = [c[0, ...] for c in columns] if timesteps > 0 else columns
      for c, d in zip(first, dtypes):
        if c.dtype != np.dtype(d.as_numpy_dtype):
          raise ValueError(f'Sampled a column of dtype {c.dtype} where '
                           f'data_dtypes has {d.name}.')
      return values + first

    outputs = tf.numpy_function(
        sample_fn, [table],
        list(replay_sample.SampleInfo.tf_dtypes()) + dtypes, stateful=True)
    info = replay_sample.SampleInfo(*[tf.ensure_shape(t, []) for t in outputs[:5]])
    return replay_sample.ReplaySample(info, list(outputs[5:]))

  def insert(self, data: List[Any], tables: Any, priorities: Any,
             name: str = None):
    """Inserts one step (`data`, a list of tensors) as an item into each of
    `tables` (rank 1) with `priorities` (rank 1, float64). Returns an op."""
    del name
    tables = tf.convert_to_tensor(tables, tf.string)
    priorities = tf.convert_to_tensor(priorities, tf.float64)

    def insert_fn(table_names, table_priorities, *values):
      if table_names.shape != table_priorities.shape or table_names.ndim != 1:
        raise ValueError('tables and priorities must be rank 1 and of the '
                         'same shape.')
      writer = self._get_client().NewWriter(1, 1, False, 1)
      writer.Append(list(values))
      for table_name, priority in zip(table_names, table_priorities):
        writer.CreateItem(_text(table_name), 1, float(priority))
      writer.Close(None)
      return np.bool_(True)

    done = tf.numpy_function(insert_fn, [tables, priorities] + list(data),
                             tf.bool, stateful=True)
    with tf.control_dependencies([done]):
      return tf.no_op()

  def update_priorities(self, table: Any, keys: Any, priorities: Any,
                        name: str = None):
    """Sets the priorities of `keys` (rank 1, uint64) in `table`. Returns an
    op."""
    del name
    keys = tf.convert_to_tensor(keys, tf.uint64)
    priorities = tf.convert_to_tensor(priorities, tf.float64)

    def update_fn(table_name, item_keys, item_priorities):
      if item_keys.shape != item_priorities.shape or item_keys.ndim != 1:
        raise ValueError('keys and priorities must be rank 1 and of the '
                         'same shape.')
      self._get_client().MutatePriorities(
          _text(table_name),
          [(int(k), float(p)) for k, p in zip(item_keys, item_priorities)],
          [], None)
      return np.bool_(True)

    done = tf.numpy_function(update_fn, [table, keys, priorities], tf.bool,
                             stateful=True)
    with tf.control_dependencies([done]):
      return tf.no_op()
