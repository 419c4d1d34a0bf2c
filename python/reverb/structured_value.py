"""Table signatures <-> `tensorflow.StructuredValue`, without TensorFlow.

Writes the same messages as TensorFlow's `nested_structure_coder`, so a
signature stored by dm-reverb reads back here and vice versa. Supported
nests: dicts (keys sorted), lists, tuples, namedtuples and, as leaves,
`tf.TensorSpec` / `tf.BoundedTensorSpec` (when TensorFlow is in use) or
`reverb.specs.TensorSpec` / `BoundedTensorSpec`.

Specs handed to users (`spec_classes(import_tensorflow=True)`, used for
`Client.server_info`, `Table.info` and `structured_writer.infer_signature`)
are TensorFlow's whenever TensorFlow can be imported, as in dm-reverb, and
`reverb.specs` ones otherwise. Internal decoding (item validation, sample
unpacking) never imports TensorFlow: it returns TensorFlow specs only if
TensorFlow is already loaded.
"""

import collections
import functools
import importlib.util
import logging
import sys
from typing import Any, Optional, Sequence

import numpy as np

from reverb import _tree
from reverb import specs
from reverb import tf_protos

# numpy dtype <-> tensorflow.DataType. Strings are numpy object arrays.
_NUMPY_TO_DT = {
    np.dtype(np.float16): tf_protos.DT_HALF,
    np.dtype(np.float32): tf_protos.DT_FLOAT,
    np.dtype(np.float64): tf_protos.DT_DOUBLE,
    np.dtype(np.int8): tf_protos.DT_INT8,
    np.dtype(np.int16): tf_protos.DT_INT16,
    np.dtype(np.int32): tf_protos.DT_INT32,
    np.dtype(np.int64): tf_protos.DT_INT64,
    np.dtype(np.uint8): tf_protos.DT_UINT8,
    np.dtype(np.uint16): tf_protos.DT_UINT16,
    np.dtype(np.uint32): tf_protos.DT_UINT32,
    np.dtype(np.uint64): tf_protos.DT_UINT64,
    np.dtype(np.bool_): tf_protos.DT_BOOL,
    np.dtype(np.complex64): tf_protos.DT_COMPLEX64,
    np.dtype(np.complex128): tf_protos.DT_COMPLEX128,
    np.dtype(object): tf_protos.DT_STRING,
}
_DT_TO_NUMPY = {dt: dtype for dtype, dt in _NUMPY_TO_DT.items()}

# dtypes whose values TensorFlow never writes as `tensor_content`; the
# others use it for tensors of more than one element.
_VALUES_ONLY = frozenset([tf_protos.DT_BOOL, tf_protos.DT_COMPLEX64,
                          tf_protos.DT_COMPLEX128, tf_protos.DT_UINT16])

# Which repeated field of TensorProto holds the values of each dtype when
# `tensor_content` is not used.
_VALUE_FIELDS = {
    tf_protos.DT_HALF: 'half_val',
    tf_protos.DT_FLOAT: 'float_val',
    tf_protos.DT_DOUBLE: 'double_val',
    tf_protos.DT_INT8: 'int_val',
    tf_protos.DT_INT16: 'int_val',
    tf_protos.DT_INT32: 'int_val',
    tf_protos.DT_UINT8: 'int_val',
    tf_protos.DT_UINT16: 'int_val',
    tf_protos.DT_INT64: 'int64_val',
    tf_protos.DT_UINT32: 'uint32_val',
    tf_protos.DT_UINT64: 'uint64_val',
    tf_protos.DT_BOOL: 'bool_val',
    tf_protos.DT_COMPLEX64: 'scomplex_val',
    tf_protos.DT_COMPLEX128: 'dcomplex_val',
    tf_protos.DT_STRING: 'string_val',
}


def numpy_dtype(data_type: int) -> np.dtype:
  """The numpy dtype of a `tensorflow.DataType` value."""
  try:
    return _DT_TO_NUMPY[data_type]
  except KeyError:
    raise ValueError(f'Unsupported tensorflow.DataType {data_type}.') from None


def data_type(dtype: Any) -> int:
  """The `tensorflow.DataType` value of a numpy (or TensorFlow) dtype."""
  as_enum = getattr(dtype, 'as_datatype_enum', None)
  if as_enum is not None:
    return as_enum
  if isinstance(dtype, np.dtype) and dtype in _NUMPY_TO_DT:
    return _NUMPY_TO_DT[dtype]  # Already normal: the common case, kept short.
  dtype = specs.TensorSpec((), dtype).dtype
  try:
    return _NUMPY_TO_DT[dtype]
  except KeyError:
    raise ValueError(f'Unsupported dtype {dtype}.') from None


def array_to_tensor_proto(array: Any, dtype: Any = None):
  """A `tensorflow.TensorProto` holding `array`."""
  array = np.asarray(array, dtype=None if dtype is None else
                     specs.TensorSpec((), dtype).dtype)
  proto = tf_protos.TensorProto(dtype=data_type(array.dtype))
  proto.tensor_shape.CopyFrom(_shape_proto(array.shape))
  if array.dtype == object or array.dtype.kind in 'SU':
    proto.string_val.extend(
        v if isinstance(v, bytes) else str(v).encode('utf-8')
        for v in array.reshape(-1))
  elif array.size > 1 and proto.dtype not in _VALUES_ONLY:
    proto.tensor_content = np.ascontiguousarray(array).tobytes()
  else:  # As TensorFlow's make_tensor_proto: the typed value field.
    flat = array.reshape(-1)
    if proto.dtype == tf_protos.DT_HALF:
      values = flat.view(np.uint16).tolist()
    elif proto.dtype in (tf_protos.DT_COMPLEX64, tf_protos.DT_COMPLEX128):
      values = np.stack([flat.real, flat.imag], axis=-1).reshape(-1).tolist()
    else:
      values = flat.tolist()
    getattr(proto, _VALUE_FIELDS[proto.dtype]).extend(values)
  return proto


def tensor_proto_to_array(proto) -> np.ndarray:
  """The numpy array held by a `tensorflow.TensorProto`."""
  dtype = numpy_dtype(proto.dtype)
  shape = tuple(d.size for d in proto.tensor_shape.dim)
  if proto.tensor_content:
    return np.frombuffer(proto.tensor_content, dtype=dtype).reshape(shape)
  values = list(getattr(proto, _VALUE_FIELDS[proto.dtype]))
  if proto.dtype == tf_protos.DT_HALF:
    values = np.array(values, np.uint16).view(np.float16)
  elif proto.dtype in (tf_protos.DT_COMPLEX64, tf_protos.DT_COMPLEX128):
    values = np.array(values).reshape(-1, 2) @ np.array([1, 1j])
  flat = np.array(values, dtype=dtype).reshape(-1)
  size = int(np.prod(shape, dtype=np.int64))
  if flat.size < size:
    # TensorFlow repeats the last value to fill the tensor.
    fill = flat[-1] if flat.size else np.zeros((), dtype)
    flat = np.concatenate([flat, np.full(size - flat.size, fill, dtype)])
  return flat.reshape(shape)


def _shape_proto(shape):
  proto = tf_protos.TensorShapeProto()
  if shape is None:
    proto.unknown_rank = True
  else:
    for d in shape:
      proto.dim.add(size=-1 if d is None else int(d))
  return proto


def _shape_from_proto(proto):
  if proto.unknown_rank:
    return None
  return tuple(None if d.size < 0 else d.size for d in proto.dim)


def _tf_spec_classes():
  """(TensorSpec, BoundedTensorSpec) of TensorFlow if it is loaded."""
  if 'tensorflow' not in sys.modules:
    return None
  module = sys.modules.get('tensorflow.python.framework.tensor_spec')
  if module is None:
    return None
  return module.TensorSpec, module.BoundedTensorSpec


@functools.lru_cache(maxsize=None)
def _load_tensorflow():
  """Imports TensorFlow if it is installed (tried once); a TensorFlow that
  fails to import is logged and left alone."""
  if 'tensorflow' in sys.modules or importlib.util.find_spec(
      'tensorflow') is None:
    return
  try:
    importlib.import_module('tensorflow')
  except Exception as e:  # pylint: disable=broad-except
    logging.warning('TensorFlow is installed but does not import (%s); '
                    'signatures use reverb.specs.', e)


def spec_classes(import_tensorflow: bool = False):
  """The (TensorSpec, BoundedTensorSpec) classes for specs: TensorFlow's if
  it is loaded (or, with `import_tensorflow`, if it can be imported), else
  `reverb.specs`'."""
  if import_tensorflow:
    _load_tensorflow()
  return _tf_spec_classes() or (specs.TensorSpec, specs.BoundedTensorSpec)


def _is_namedtuple(value) -> bool:
  return isinstance(value, tuple) and hasattr(value, '_fields')


def _tf_shape(shape):
  as_list = getattr(shape, 'as_list', None)
  if as_list is None:
    return shape
  return None if shape.rank is None else as_list()


def shapes_compatible(a: Optional[Sequence[Optional[int]]],
                      b: Optional[Sequence[Optional[int]]]) -> bool:
  """Whether two shapes can describe the same tensor (None: unknown rank;
  a None dimension: unknown size)."""
  if a is None or b is None:
    return True
  return len(a) == len(b) and all(
      x is None or y is None or x == y for x, y in zip(a, b))


def spec_shape(spec: Any) -> Optional[tuple]:
  """The shape of a tensor spec (or array) as a tuple; None for an unknown
  rank."""
  shape = _tf_shape(spec.shape)
  return None if shape is None else tuple(shape)


def spec_data_type_and_shape(spec: Any):
  """(`tensorflow.DataType` value, shape tuple or None) of a tensor spec."""
  return data_type(spec.dtype), spec_shape(spec)


def encode(nest: Any, *, none_leaves: bool = False):
  """Encodes a nest of tensor specs (or of None if `none_leaves`);
  ValueError for other leaves."""
  value = tf_protos.StructuredValue()
  if none_leaves and nest is None:
    value.none_value.SetInParent()
  elif isinstance(nest, dict):
    value.dict_value.SetInParent()
    for key in sorted(nest):
      if not isinstance(key, str):
        raise ValueError(f'Unsupported signature key {key!r}: keys must be '
                         'strings.')
      value.dict_value.fields[key].CopyFrom(
          encode(nest[key], none_leaves=none_leaves))
  elif _is_namedtuple(nest):
    value.named_tuple_value.name = type(nest).__name__
    for field, item in zip(nest._fields, nest):
      value.named_tuple_value.values.add(key=field).value.CopyFrom(
          encode(item, none_leaves=none_leaves))
  elif isinstance(nest, (list, tuple)):
    target = value.list_value if isinstance(nest, list) else value.tuple_value
    target.SetInParent()
    for item in nest:
      target.values.add().CopyFrom(encode(item, none_leaves=none_leaves))
  elif isinstance(nest, specs.TensorSpec) or any(
      cls.__name__ == 'TensorSpec' and cls.__module__.startswith('tensorflow')
      for cls in type(nest).__mro__):  # tf.TensorSpec and its subclasses.
    name = nest.name or ''
    shape = _shape_proto(_tf_shape(nest.shape))
    dtype = data_type(nest.dtype)
    if hasattr(nest, 'minimum') and hasattr(nest, 'maximum'):
      bounded = value.bounded_tensor_spec_value
      bounded.name = name
      bounded.shape.CopyFrom(shape)
      bounded.dtype = dtype
      numpy_type = numpy_dtype(dtype)
      bounded.minimum.CopyFrom(array_to_tensor_proto(nest.minimum, numpy_type))
      bounded.maximum.CopyFrom(array_to_tensor_proto(nest.maximum, numpy_type))
    else:
      value.tensor_spec_value.name = name
      value.tensor_spec_value.shape.CopyFrom(shape)
      value.tensor_spec_value.dtype = dtype
  else:
    raise ValueError(f'Unsupported signature spec: {nest}')
  return value


def decode(value, *, import_tensorflow: bool = False) -> Any:
  """Decodes what `encode` (or TensorFlow's coder) wrote, with leaves of
  `spec_classes(import_tensorflow)`."""
  return _decode(value, spec_classes(import_tensorflow))


def _decode(value, classes) -> Any:
  kind = value.WhichOneof('kind')
  if kind == 'dict_value':
    return {key: _decode(value.dict_value.fields[key], classes)
            for key in sorted(value.dict_value.fields)}
  if kind == 'named_tuple_value':
    pairs = value.named_tuple_value.values
    cls = collections.namedtuple(value.named_tuple_value.name,
                                 [pair.key for pair in pairs])
    return cls(*[_decode(pair.value, classes) for pair in pairs])
  if kind == 'list_value':
    return [_decode(v, classes) for v in value.list_value.values]
  if kind == 'tuple_value':
    return tuple(_decode(v, classes) for v in value.tuple_value.values)
  if kind == 'none_value':
    return None
  # TensorFlow's classes take the DataType value; reverb.specs numpy dtypes.
  tensorflow = classes[0] is not specs.TensorSpec
  if kind == 'tensor_spec_value':
    spec = value.tensor_spec_value
    dtype = spec.dtype if tensorflow else numpy_dtype(spec.dtype)
    return classes[0](_shape_from_proto(spec.shape), dtype, spec.name or None)
  if kind == 'bounded_tensor_spec_value':
    spec = value.bounded_tensor_spec_value
    dtype = spec.dtype if tensorflow else numpy_dtype(spec.dtype)
    return classes[1](_shape_from_proto(spec.shape), dtype,
                      tensor_proto_to_array(spec.minimum),
                      tensor_proto_to_array(spec.maximum), spec.name or None)
  raise ValueError(f'Unsupported StructuredValue kind {kind!r} in signature.')


def data_type_name(data_type_value: int) -> str:
  """TensorFlow's name of a `tensorflow.DataType` value: float, int64, ..."""
  for name, value in vars(tf_protos).items():
    if name.startswith('DT_') and value == data_type_value:
      return name[len('DT_'):].lower()
  return str(data_type_value)


def shape_string(shape: Optional[Sequence[Optional[int]]]) -> str:
  """TensorFlow's shape DebugString: [?,2], [] or <unknown>."""
  if shape is None:
    return '<unknown>'
  return '[' + ','.join('?' if d is None else str(d) for d in shape) + ']'


def describe_specs(named_specs: Sequence[tuple]) -> str:
  """dm-reverb's description of (name, `tensorflow.DataType` value, shape)
  triples: "0: Tensor<name: 'a', dtype: float, shape: [2]>, 1: ..."."""
  return ', '.join(
      f"{i}: Tensor<name: '{name}', dtype: {data_type_name(data_type_value)}, "
      f'shape: {shape_string(shape)}>'
      for i, (name, data_type_value, shape) in enumerate(named_specs))


class FlatSignature:
  """A table signature with its leaves' (spec, `tensorflow.DataType` value,
  shape), worked out once (item validation compares every item to them)."""

  def __init__(self, signature: Any):
    self.signature = signature
    self.specs = [(spec,) + spec_data_type_and_shape(spec)
                  for spec in _tree.flatten(signature)]

  @property
  def named_specs(self) -> list:
    """(name, dtype value, shape) of each leaf, named as dm-reverb's
    messages name them: its path joined by '/', then the spec's own name."""
    return [('/'.join([str(p) for p in path] + ([spec.name] if spec.name
                                                  else [])), data_type, shape)
            for (path, _), (spec, data_type, shape) in zip(
                _tree.flatten_with_path(self.signature), self.specs)]
