"""What TrajectoryDataset and TimestepDataset share: argument checks, the
element spec and the generator that feeds `tf.data` from a Sampler.

The datasets are built on `tf.data.Dataset.from_generator`, the public
tf.data API, instead of a compiled op library: nothing is linked against
TensorFlow, so one build of this package works with every TensorFlow 2.x
that has `from_generator(output_signature=...)` (2.4 and later), and a
TensorFlow that lacks it fails with a clear ImportError at use, never at
`import reverb`. Sampling, decompression and prefetching still run in C++
threads without the GIL; the generator only hands over finished samples.
The cost is that the dataset cannot be serialized into a graph for another
process (neither can dm-reverb's: its datasets depend on external state).
"""

from typing import Any, Iterator, Sequence

import numpy as np

from reverb import _tree
from reverb import errors
from reverb import pybind
from reverb import replay_sample
from reverb import structured_value
from reverb.cc import schema_pb2

# How long an iterator waits for the table signature before it samples
# unvalidated (as dm-reverb).
_SIGNATURE_TIMEOUT_MS = 30_000


def import_tensorflow():
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        'reverb datasets need TensorFlow (pip install tensorflow-cpu); the '
        'rest of reverb, including ReplayIterator, does not.') from e
  if not hasattr(tf.data.Dataset, 'from_generator'):
    raise ImportError(f'TensorFlow {tf.__version__} is too old for reverb '
                      'datasets (2.4 or later is needed).')
  return tf


def check_arguments(max_in_flight_samples_per_worker: int,
                    num_workers_per_iterator: int,
                    max_samples_per_stream: int,
                    rate_limiter_timeout_ms: int,
                    max_samples: int):
  """ValueError for arguments dm-reverb rejects."""
  if max_in_flight_samples_per_worker < 1:
    raise ValueError(
        f'max_in_flight_samples_per_worker ({max_in_flight_samples_per_worker})'
        ' must be >= 1')
  if num_workers_per_iterator < 1 and num_workers_per_iterator != -1:
    raise ValueError(
        f'num_workers_per_iterator ({num_workers_per_iterator}) must be >= 1 '
        'or -1')
  if max_samples_per_stream < 1 and max_samples_per_stream != -1:
    raise ValueError(
        f'max_samples_per_stream ({max_samples_per_stream}) must be >= 1 or '
        '-1')
  if rate_limiter_timeout_ms < -1:
    raise ValueError(
        f'rate_limiter_timeout_ms ({rate_limiter_timeout_ms}) must be >= -1')
  if max_samples < 1 and max_samples != -1:
    raise ValueError(f'max_samples ({max_samples}) must be >= 1 or -1')


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


def _check_signature(table: str, signature: Any, specs: Sequence[Any]):
  """ValueError unless the table signature fits the dataset's specs."""
  expected = [structured_value.spec_data_type_and_shape(s)
              for s in _tree.flatten(signature)]
  wanted = [structured_value.spec_data_type_and_shape(s) for s in specs]
  if len(expected) != len(wanted) or any(
      dtype != want_dtype or
      not structured_value.shapes_compatible(want_shape, shape)
      for (dtype, shape), (want_dtype, want_shape) in zip(expected, wanted)):
    raise ValueError(
        f'The dtypes and shapes of the dataset do not match the signature of '
        f'table {table!r}: {signature}; dataset specs: {list(specs)}')


def _check_value(table: str, value: np.ndarray, spec: Any, batched: bool):
  dtype, shape = structured_value.spec_data_type_and_shape(spec)
  value_shape = value.shape[1:] if batched else value.shape
  if (structured_value.data_type(value.dtype) != dtype or
      not structured_value.shapes_compatible(shape, value_shape)):
    raise ValueError(
        f'Sampled {value.dtype}{list(value_shape)} from table {table!r} where '
        f'the dataset expects {spec}.')


def _open_sampler(server_address: str, table: str, specs: Sequence[Any],
                  options: dict):
  """A Sampler for one iterator, after checking the table signature."""
  client = pybind.Client(server_address)
  try:
    _, infos = client.ServerInfo(_SIGNATURE_TIMEOUT_MS)
  except errors.DeadlineExceededError:
    infos = []  # Sample unvalidated, as dm-reverb.
  for serialized in infos:
    info = schema_pb2.TableInfo.FromString(serialized)
    if info.name == table and info.HasField('signature'):
      _check_signature(table, structured_value.decode(info.signature), specs)
  timeout = options['rate_limiter_timeout_ms']
  return client.NewSampler(
      table,
      max_samples=options['max_samples'],
      max_in_flight_samples_per_worker=options[
          'max_in_flight_samples_per_worker'],
      num_workers=max(1, options['num_workers_per_iterator']),
      max_samples_per_stream=options['max_samples_per_stream'],
      rate_limiter_timeout_ms=None if timeout < 0 else timeout)


def samples(server_address: str, table: str, data_spec: Any,
            emit_timesteps: bool, options: dict) -> Iterator[Any]:
  """Yields ReplaySamples (of numpy values) for one dataset iterator."""
  specs = _tree.flatten(data_spec)
  sampler = _open_sampler(server_address, table, specs, options)
  try:
    while True:
      try:
        info, columns, timesteps = sampler.GetNextTrajectory(None)
      except (errors.DeadlineExceededError, StopIteration):
        return  # Rate limiter timeout or max_samples: end of sequence.
      if len(columns) != len(specs):
        raise ValueError(
            f'Table {table!r} returned {len(columns)} columns but the '
            f'dataset expects {len(specs)}.')
      if emit_timesteps:
        if timesteps < 0:
          raise ValueError(
              "Can't split non timestep trajectory into timesteps.")
        steps = [[column[t, ...] for column in columns]
                 for t in range(timesteps)]
      else:
        steps = [columns]
      for step in steps:
        for value, spec in zip(step, specs):
          _check_value(table, value, spec, batched=False)
        yield replay_sample.ReplaySample(
            replay_sample.SampleInfo(np.uint64(info[0]), *info[1:]),
            _tree.unflatten_as(data_spec, step))
  finally:
    sampler.Close()


# Samples handed to tf.data per generator call on the batched path, and how
# long a call waits for them once it has the first.
_MAX_BATCH = 64
_FILL_TIMEOUT_MS = 5


def sample_batches(server_address: str, table: str, data_spec: Any,
                   options: dict) -> Iterator[Any]:
  """As `samples` (whole items), but yields what the sampler has ready in
  batches (leading dimension), for tf.data to unbatch in C++."""
  specs = _tree.flatten(data_spec)
  sampler = _open_sampler(server_address, table, specs, options)
  try:
    while True:
      try:
        info, columns = sampler.GetNextBatch(_MAX_BATCH, None,
                                             _FILL_TIMEOUT_MS)
      except (errors.DeadlineExceededError, StopIteration):
        return
      if len(columns) != len(specs):
        raise ValueError(
            f'Table {table!r} returned {len(columns)} columns but the '
            f'dataset expects {len(specs)}.')
      for value, spec in zip(columns, specs):
        _check_value(table, value, spec, batched=True)
      yield replay_sample.ReplaySample(replay_sample.SampleInfo(*info),
                                       _tree.unflatten_as(data_spec, columns))
  finally:
    sampler.Close()


def make_dataset(tf, server_address: str, table: str, spec: Any,
                 emit_timesteps: bool, options: dict):
  """A tf.data.Dataset sampling `table`; each iterator has its own
  sampler.

  Items of fully known shapes travel in batches (one Python call per batch,
  unbatched by tf.data in C++); others one by one.
  """
  data_specs = _tree.flatten(spec.data)
  if not emit_timesteps and all(
      s.shape.is_fully_defined() for s in data_specs):
    batched = tf.nest.map_structure(
        lambda s: tf.TensorSpec([None] + s.shape.as_list(), s.dtype), spec)
    return tf.data.Dataset.from_generator(
        lambda: sample_batches(server_address, table, spec.data, options),
        output_signature=batched).unbatch()
  return tf.data.Dataset.from_generator(
      lambda: samples(server_address, table, spec.data, emit_timesteps,
                      options),
      output_signature=spec)
