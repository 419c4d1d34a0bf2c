"""What TrajectoryDataset and TimestepDataset share: argument checks, the
element spec, and the pipeline around the ReverbSampleRows op.

The op (tf_ops/sample_op.cc) is built against TensorFlow's stable C kernel
API, so one build of this package loads under any TensorFlow 2.x with that
API; a TensorFlow that cannot load it fails with a clear ImportError when a
dataset is first made, never at `import reverb`. Each call of the op hands
over a batch of rows (samples, or one sample's timesteps) that C++ worker
threads sampled and decompressed ahead; the datasets unbatch them in
tf.data, or, for `dataset.batch(n)`, ask the op for exactly n samples.
"""

import functools
import os
from typing import Any, Optional

from reverb import _tree
from reverb import replay_sample

def import_tensorflow():
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        'reverb datasets need TensorFlow (pip install tensorflow-cpu); the '
        'rest of reverb, including ReplayIterator, does not.') from e
  if _map_dataset_class() is None:
    raise ImportError(f'TensorFlow {tf.__version__} has no map dataset that '
                      'reverb datasets can use (map_op._MapDataset or '
                      'dataset_ops.MapDataset).')
  return tf


def check_arguments(max_in_flight_samples_per_worker: int,
                    num_workers_per_iterator: int,
                    max_samples_per_stream: int,
                    rate_limiter_timeout_ms: int,
                    max_samples: int):
  """ValueError for arguments dm-reverb rejects, worded as dm-reverb's."""
  if max_in_flight_samples_per_worker < 1:
    raise ValueError(
        'max_in_flight_samples_per_worker (%d) must be a positive integer' %
        max_in_flight_samples_per_worker)
  if num_workers_per_iterator < 1 and num_workers_per_iterator != -1:
    raise ValueError(
        'num_workers_per_iterator (%d) must be a positive integer or -1' %
        num_workers_per_iterator)
  if max_samples_per_stream < 1 and max_samples_per_stream != -1:
    raise ValueError(
        'max_samples_per_stream (%d) must be a positive integer or -1' %
        max_samples_per_stream)
  if rate_limiter_timeout_ms < -1:
    raise ValueError('rate_limiter_timeout_ms (%d) must be an integer >= -1' %
                     rate_limiter_timeout_ms)
  if max_samples < 1 and max_samples != -1:
    raise ValueError('max_samples (%d) must be a positive integer or -1' %
                     max_samples)


def _flatten_up_to(structure: Any, value: Any) -> list:
  """The subtrees of `value` at the leaves of `structure` (shapes are
  lists, so they cannot be flattened on their own)."""
  if not _tree._is_nested(structure):  # pylint: disable=protected-access
    return [value]
  if isinstance(structure, dict):
    if not isinstance(value, dict) or set(value) != set(structure):
      raise ValueError
    return [leaf for key in sorted(structure)
            for leaf in _flatten_up_to(structure[key], value[key])]
  if not _tree._is_nested(value) or len(value) != len(structure):  # pylint: disable=protected-access
    raise ValueError
  return [leaf for s, v in zip(structure, value)
          for leaf in _flatten_up_to(s, v)]


def lists_to_tuples(structure: Any) -> Any:
  """tf.data reads lists as tensors; structures need tuples."""
  if isinstance(structure, list):
    return tuple(lists_to_tuples(x) for x in structure)
  if isinstance(structure, dict):
    return type(structure)(
        (k, lists_to_tuples(v)) for k, v in structure.items())
  if isinstance(structure, tuple):
    children = [lists_to_tuples(x) for x in structure]
    return (type(structure)(*children) if hasattr(structure, '_fields') else
            tuple(children))
  return structure


def element_spec(tf, dtypes: Any, shapes: Any):
  """ReplaySample of the info specs and the data specs.

  Raises:
    ValueError: If `dtypes` and `shapes` differ in structure.
  """
  try:
    flat_shapes = _flatten_up_to(dtypes, shapes)
  except (ValueError, TypeError):
    raise ValueError(
        f'dtypes and shapes must have the same structure, got {dtypes} and '
        f'{shapes}') from None
  structure = lists_to_tuples(dtypes)
  data = _tree.unflatten_as(structure, [
      tf.TensorSpec(shape, dtype)
      for dtype, shape in zip(_tree.flatten(structure), flat_shapes)
  ])
  info = replay_sample.SampleInfo(*[
      tf.TensorSpec([], dtype) for dtype in replay_sample.SampleInfo.tf_dtypes()
  ])
  return replay_sample.ReplaySample(info, data)


@functools.lru_cache(maxsize=None)
def load_ops(tf):
  """The op library, loaded into `tf` (once).

  Raises:
    ImportError: If the package was built without TensorFlow, or this
      TensorFlow cannot load the library.
  """
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      'libreverb_tf_ops.so')
  if not os.path.exists(path):
    raise ImportError(
        'reverb was built without TensorFlow, so it has no dataset ops; '
        'reinstall it with TensorFlow installed (ReplayIterator needs no '
        'TensorFlow).')
  try:
    return tf.load_op_library(path)
  except (tf.errors.OpError, OSError) as e:
    raise ImportError(f'TensorFlow {tf.__version__} cannot load {path}: '
                      f'{e}') from e


# Samples per op call for the unbatched dataset, and how long a call waits
# for more once it has the first.
_FLEXIBLE_BATCH = 64
_FILL_TIMEOUT_MS = 5


def _map_dataset_class():
  """TensorFlow's (private) map dataset class, which takes the options the
  datasets need; None if this TensorFlow has neither known location."""
  try:
    from tensorflow.python.data.ops import map_op  # pylint: disable=g-import-not-at-top
    return map_op._MapDataset  # pylint: disable=protected-access  # TF >= 2.13
  except (ImportError, AttributeError):
    pass
  try:
    from tensorflow.python.data.ops import dataset_ops  # pylint: disable=g-import-not-at-top
    return dataset_ops.MapDataset  # TF < 2.13
  except (ImportError, AttributeError):
    return None


def _map_until_out_of_range(dataset, function):
  """`dataset.map(function)`, ended (not failed) by the first OutOfRange
  error of the function, which runs on the thread that asks for the element
  rather than in TensorFlow's inter-op pool. The public `map` has neither:
  it turns OutOfRange into InvalidArgument, and a hand-off to the pool
  costs 15-25% of the samples per second."""
  return _map_dataset_class()(dataset, function,
                              use_inter_op_parallelism=False,
                              preserve_cardinality=False)


def sample_rows(tf, server_address: Any, table: Any, spec: Any,
                emit_timesteps: bool, options: dict,
                batch_size: Optional[int] = None,
                fill_timeout_ms: int = _FILL_TIMEOUT_MS,
                drop_remainder: bool = False,
                nest_rows: bool = False):
  """A dataset of ReplaySamples with a leading dimension of rows: up to
  `batch_size` samples per element (all of them unless the sequence ends,
  when `fill_timeout_ms` is -1; never fewer with `drop_remainder`), or the
  timesteps of one sample. The default
  `batch_size` stacks what is ready, up to 64 samples of fully known shapes
  or else one. An element may have zero rows (nothing was ready within the
  op's wait); `unbatch` skips it. With `nest_rows` every component has one
  more leading dimension, 1 (0 with zero rows), so that `unbatch` hands
  over whole batches and skips the empty ones. tf_ops/README.md says why.

  `server_address` (one address or a sequence of them) and `table` are
  strings or string tensors. Each iterator
  checks the table signature, then samples through its own streams
  (tf.data instantiates the op's kernel per iterator); the pipeline holds no
  Python function, so it can be saved in a graph.

  Raises:
    ImportError: See `load_ops`.
  """
  ops = load_ops(tf)
  specs = _tree.flatten(spec.data)
  if batch_size is None:
    batch_size = (_FLEXIBLE_BATCH if all(s.shape.is_fully_defined()
                                         for s in specs) else 1)
  attrs = dict(
      max_in_flight_samples_per_worker=options[
          'max_in_flight_samples_per_worker'],
      num_workers=max(1, options['num_workers_per_iterator']),
      max_samples_per_stream=options['max_samples_per_stream'],
      rate_limiter_timeout_ms=options['rate_limiter_timeout_ms'],
      max_samples=options['max_samples'],
      dtypes=[s.dtype for s in specs],
      ranks=[-1 if s.shape.rank is None else s.shape.rank for s in specs],
      dims=[-1 if d is None else d for s in specs
            if s.shape.rank is not None for d in s.shape.as_list()],
      emit_timesteps=emit_timesteps,
      batch_size=batch_size,
      fill_timeout_ms=fill_timeout_ms,
      drop_remainder=drop_remainder,
      nest_rows=nest_rows)

  # Even with drop_remainder the number of rows is not static: a run may
  # return none.
  rows = tf.TensorShape([None, None] if nest_rows else [None])

  def sample(_):
    *info, data = ops.reverb_sample_rows(server_address, table, **attrs)
    for tensor in info:
      tensor.set_shape(rows)
    for tensor, s in zip(data, specs):
      tensor.set_shape(rows.concatenate(s.shape))
    return replay_sample.ReplaySample(replay_sample.SampleInfo(*info),
                                      _tree.unflatten_as(spec.data, data))

  return _map_until_out_of_range(tf.data.Dataset.from_tensors(0).repeat(),
                                 sample)

