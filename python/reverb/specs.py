"""TensorFlow-free tensor specs for table signatures.

`Table(signature=...)` takes a nest of `tf.TensorSpec` when TensorFlow is
used, or of these classes otherwise; both are stored in the same form
(a `tensorflow.StructuredValue`, as TensorFlow's nested_structure_coder
writes it) and are interchangeable on the wire. Specs handed back
(`Table.info`, `Client.server_info`, `structured_writer.infer_signature`)
are these classes only where TensorFlow cannot be imported; elsewhere they
are `tf.TensorSpec`s, as in dm-reverb.
"""

from typing import Any, Optional, Sequence

import numpy as np

Shape = Optional[Sequence[Optional[int]]]


def _normalize_dtype(dtype: Any) -> np.dtype:
  if dtype in (str, bytes, object) or (
      isinstance(dtype, np.dtype) and dtype.kind in 'OSU'):
    return np.dtype(object)
  return np.dtype(dtype)


class TensorSpec:
  """Shape, dtype and optional name of a tensor.

  `shape` is a sequence of ints, with None for unknown dimensions, or None
  for an unknown rank. Strings use dtype `object` (str and bytes map to it).
  """

  __slots__ = ('_shape', '_dtype', '_name')

  def __init__(self, shape: Shape, dtype: Any, name: Optional[str] = None):
    self._shape = None if shape is None else tuple(
        None if d is None else int(d) for d in shape)
    self._dtype = _normalize_dtype(dtype)
    self._name = name

  @property
  def shape(self):
    return self._shape

  @property
  def dtype(self) -> np.dtype:
    return self._dtype

  @property
  def name(self) -> Optional[str]:
    return self._name

  def _fields(self):
    return (self._shape, self._dtype, self._name)

  def __eq__(self, other):
    return type(self) is type(other) and self._fields() == other._fields()

  def __hash__(self):
    return hash(self._fields())

  def __repr__(self):
    return (f'{type(self).__name__}(shape={self._shape}, '
            f'dtype={self._dtype}, name={self._name!r})')


class BoundedTensorSpec(TensorSpec):
  """A TensorSpec with inclusive `minimum` and `maximum` values."""

  __slots__ = ('_minimum', '_maximum')

  def __init__(self, shape: Shape, dtype: Any, minimum: Any, maximum: Any,
               name: Optional[str] = None):
    super().__init__(shape, dtype, name)
    self._minimum = np.array(minimum, dtype=self.dtype)
    self._maximum = np.array(maximum, dtype=self.dtype)

  @property
  def minimum(self) -> np.ndarray:
    return self._minimum

  @property
  def maximum(self) -> np.ndarray:
    return self._maximum

  def _fields(self):
    return super()._fields() + (self._minimum.tobytes(), self._minimum.shape,
                                self._maximum.tobytes(), self._maximum.shape)

  def __repr__(self):
    return (f'BoundedTensorSpec(shape={self.shape}, dtype={self.dtype}, '
            f'name={self.name!r}, minimum={self._minimum!r}, '
            f'maximum={self._maximum!r})')
