"""Reverb's own copies of the TensorFlow messages it stores.

`TensorProto`, `TensorShapeProto`, `StructuredValue`, `TensorSpecProto`, ...
and the `DataType` values (`DT_FLOAT`, ...), with TensorFlow's field numbers.
"""

from reverb import _protos

for _file in ('tensorflow/core/framework/types.proto',
              'tensorflow/core/framework/tensor_shape.proto',
              'tensorflow/core/framework/tensor.proto',
              'tensorflow/core/protobuf/struct.proto'):
  globals().update(_protos.file_symbols(_file))
del _file
