"""Signatures <-> tensorflow.StructuredValue, byte-compatible with
TensorFlow's nested_structure_coder."""

import numpy as np
import pytest

from reverb import specs
from reverb import structured_value
from reverb import tf_protos

# These tests are about the specs of a process without TensorFlow.
pytestmark = pytest.mark.usefixtures('without_tensorflow_specs')


def test_tensor_spec_encoding_matches_tensorflow_layout():
  value = structured_value.encode(
      {'b': specs.TensorSpec([None, 3], np.float32, 'b')})
  expected = tf_protos.StructuredValue()
  spec = expected.dict_value.fields['b'].tensor_spec_value
  spec.name = 'b'
  spec.shape.dim.add(size=-1)
  spec.shape.dim.add(size=3)
  spec.dtype = tf_protos.DT_FLOAT
  assert value == expected


def test_list_tuple_and_unknown_rank():
  value = structured_value.encode(
      [(specs.TensorSpec(None, np.int32),), specs.TensorSpec([], bool)])
  assert value.WhichOneof('kind') == 'list_value'
  inner = value.list_value.values[0]
  assert inner.WhichOneof('kind') == 'tuple_value'
  assert inner.tuple_value.values[0].tensor_spec_value.shape.unknown_rank
  assert structured_value.decode(value) == [
      (specs.TensorSpec(None, np.int32),), specs.TensorSpec([], bool)]


@pytest.mark.parametrize('dtype', [
    np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64,
    np.complex128, object])
def test_every_dtype_round_trips(dtype):
  spec = specs.TensorSpec([2], dtype)
  assert structured_value.decode(structured_value.encode(spec)) == spec


def test_bounds_decode_from_value_fields_as_tensorflow_writes_them():
  proto = tf_protos.TensorProto(dtype=tf_protos.DT_INT32)
  proto.tensor_shape.dim.add(size=3)
  proto.int_val.append(4)  # TensorFlow repeats the last value.
  np.testing.assert_array_equal(
      structured_value.tensor_proto_to_array(proto), [4, 4, 4])
  half = tf_protos.TensorProto(dtype=tf_protos.DT_HALF)
  half.half_val.append(int(np.array(1.5, np.float16).view(np.uint16)))
  assert structured_value.tensor_proto_to_array(half) == np.float16(1.5)


def test_bounded_spec_round_trips_arrays():
  spec = specs.BoundedTensorSpec([2], np.float32, [0.0, -1.0], [1.0, 1.0], 'x')
  decoded = structured_value.decode(structured_value.encode(spec))
  assert decoded == spec
  np.testing.assert_array_equal(decoded.minimum, [0.0, -1.0])


def test_string_tensor_proto():
  proto = structured_value.array_to_tensor_proto(np.array([b'a', 'b'], object))
  assert list(proto.string_val) == [b'a', b'b']
  np.testing.assert_array_equal(
      structured_value.tensor_proto_to_array(proto), [b'a', b'b'])
