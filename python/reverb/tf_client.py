"""TFClient: Reverb calls as TensorFlow ops (eager, tf.function, sessions).

The ops are kernels of the op library (tf_ops/client_ops.cc, on
TensorFlow's stable C API), named as dm-reverb's: no Python runs inside the
graphs they build, so a `tf.function` that samples can be saved with
`tf.saved_model.save` and run in another process. `server_address` (one
address, or a sequence of the addresses of shards, docs/sharding.md) and
`table` may be string tensors (constants, placeholders, function arguments).
Importing this module imports TensorFlow.
"""

import ctypes
import os
import threading
from typing import Any, Optional, Sequence

from reverb import _datasets
from reverb import _tree
from reverb import replay_sample

tf = _datasets.import_tensorflow()

_LIBRARY = 'libreverb_tf_ops.so'

# AutoGraph would convert the methods (and reverb._tree) when a tf.function
# calls them, and warn that it cannot; they build ops and need no conversion.
_not_converted = tf.autograph.experimental.do_not_convert


def _end_waits_at_exit_and_on_interrupts():
  """Makes the ops' waits (for a sample, for an insert's confirmation) end
  with CancelledError when the interpreter exits, so that a thread blocked
  in an op cannot keep the process alive, and on SIGINT (Ctrl-C), which
  Python could not deliver while its main thread waits in an op. The
  library must be loaded."""
  library = ctypes.CDLL(_LIBRARY, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
  library.ReverbTfClientWatchInterrupts()
  # Before the interpreter waits for non-daemon threads (plain atexit
  # functions run after that).
  register = getattr(threading, '_register_atexit', None)
  if register is None:
    import atexit  # pylint: disable=g-import-not-at-top
    register = atexit.register
  register(library.ReverbTfClientCancelWaits)


_load_lock = threading.Lock()
_ops = None


def _load_ops():
  """The op library, loaded once (ImportError if it cannot be)."""
  global _ops
  with _load_lock:
    if _ops is None:
      ops = _datasets.load_ops(tf)
      _end_waits_at_exit_and_on_interrupts()
      _ops = ops
  return _ops


class TFClient:
  """Client class for calling Reverb replay servers from a TensorFlow graph."""

  def __init__(self,
               server_address: Any,
               shared_name: Optional[str] = None,
               name: str = 'reverb'):
    """Creates the client.

    Args:
      server_address: Address of the server ("host:port" or "unix:PATH"), a
        sequence of the addresses of shards (docs/sharding.md), or a string
        tensor holding either (a scalar or a vector).
      shared_name: Ignored (dm-reverb shares a client resource under this
        name; here every op keeps one client per address).
      name: Prefix of the ops' names.

    Raises:
      ImportError: If the op library is missing or this TensorFlow cannot
        load it.
    """
    del shared_name
    self._name = name
    self._server_address = server_address
    self._eager_address = None
    self._ops = _load_ops()

  @property
  def server_address(self) -> Any:
    return self._server_address

  def _address(self) -> Any:
    """The address(es) as an op input: in eager mode a tensor made once.
    (With a tensor there, as dm-reverb's client handle, an eager op takes
    TensorFlow's fast path, whose errors end with the op's name as
    dm-reverb's do.)"""
    if not tf.executing_eagerly() or tf.is_tensor(self._server_address):
      return self._server_address
    if self._eager_address is None:
      self._eager_address = tf.constant(self._server_address)
    return self._eager_address

  @_not_converted
  def sample(self,
             table: Any,
             data_dtypes: Any,
             name: Optional[str] = None) -> replay_sample.ReplaySample:
    """Samples an item of `table` and returns its first timestep.

    Waits for the table's rate limiter as long as it takes.

    Args:
      table: Name of the table (a string, or a string tensor).
      data_dtypes: Dtypes of the item's columns; can be nested.
      name: Optional name for the op.

    Returns:
      A ReplaySample of scalar SampleInfo tensors and the data, nested as
      `data_dtypes`.

    Raises:
      tf.errors.NotFoundError: At run time, if the table does not exist.
      tf.errors.InvalidArgumentError: At run time, if the item does not
        have the columns of `data_dtypes` or cannot be split into timesteps.
    """
    with tf.compat.v1.name_scope(name, f'{self._name}_sample',
                                 ['sample']) as scope:
      key, probability, table_size, priority, times_sampled, data = (
          self._ops.reverb_client_sample(
              server_address=self._address(),
              table=table,
              Toutput_list=_tree.flatten(data_dtypes),
              name=scope))
      return replay_sample.ReplaySample(
          info=replay_sample.SampleInfo(
              key=key,
              probability=probability,
              table_size=table_size,
              priority=priority,
              times_sampled=times_sampled),
          data=_tree.unflatten_as(data_dtypes, data))

  @_not_converted
  def insert(self,
             data: Sequence[Any],
             tables: Any,
             priorities: Any,
             name: Optional[str] = None):
    """Inserts `data` as one step, and an item of it into each table.

    The item into `tables[i]` has priority `priorities[i]`. The step must
    fit the signature of every table that has one: if it does not (or a
    table is unknown), nothing is inserted.

    Args:
      data: Tensors of the step.
      tables: Rank 1 string tensor: the names of the tables.
      priorities: Rank 1 float64 tensor: the priorities of the items.
      name: Optional name for the op.

    Returns:
      The insert op (None in eager mode, where it has run).

    Raises:
      ValueError: If `tables` is not a string tensor of rank 1,
        `priorities` not a float64 tensor of rank 1, or their shapes differ.
      tf.errors.InvalidArgumentError: At run time, if a table is unknown or
        the step does not fit its signature.
    """
    if tables.dtype != tf.string or tables.shape.rank != 1:
      raise ValueError('tables must be a string tensor of rank 1')
    if priorities.dtype != tf.float64 or priorities.shape.rank != 1:
      raise ValueError('priorities must be a float64 tensor of rank 1')
    if not tables.shape.is_compatible_with(priorities.shape):
      raise ValueError('priorities and tables must have the same shape')
    with tf.compat.v1.name_scope(name, f'{self._name}_insert',
                                 ['insert']) as scope:
      return self._ops.reverb_client_insert(
          server_address=self._address(),
          data=data,
          tables=tables,
          priorities=priorities,
          name=scope)

  @_not_converted
  def update_priorities(self,
                        table: Any,
                        keys: Any,
                        priorities: Any,
                        name: Optional[str] = None):
    """Sets the priorities of the items of `keys` in `table`.

    Keys of items that are not in the table are ignored.

    Args:
      table: Name of the table (a string, or a string tensor).
      keys: Rank 1 uint64 tensor: the keys of the items.
      priorities: Rank 1 float64 tensor, as long as `keys`: their new
        priorities.
      name: Optional name for the op.

    Returns:
      The update op (None in eager mode, where it has run).

    Raises:
      ValueError: In graph mode, if `keys` or `priorities` is not of rank 1
        or their lengths differ (in eager mode: tf.errors.InvalidArgumentError).
      tf.errors.NotFoundError: At run time, if the table does not exist.
    """
    with tf.compat.v1.name_scope(name, f'{self._name}_update_priorities',
                                 ['update_priorities']) as scope:
      return self._ops.reverb_client_update_priorities(
          server_address=self._address(),
          table=table,
          keys=keys,
          priorities=priorities,
          name=scope)
