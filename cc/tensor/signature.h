// Table signatures, flattened: what clients check data against.
//
// A table's signature is a `tensorflow.StructuredValue` nest of tensor specs
// (see proto/tensorflow/core/protobuf/struct.proto). FlattenSignature lists
// its specs in the order `tree.flatten` visits the nest (dict keys sorted,
// named tuple fields in their order), each named by its path joined with
// '/' (and the spec's own name, if it has one, appended), as dm-reverb names
// them in its messages: {'a': spec, 'b': (spec,)} -> 'a', 'b/0'.
//
// The descriptions follow TensorFlow's spelling (dtype `float`, shape
// `[?,2]`, `<unknown>` for an unknown rank), so that messages read as
// dm-reverb's.
#ifndef REVERB_CC_TENSOR_SIGNATURE_H_
#define REVERB_CC_TENSOR_SIGNATURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cc/support/export.h"
#include "tensorflow/core/framework/types.pb.h"
#include "tensorflow/core/protobuf/struct.pb.h"

namespace deepmind::reverb {

// A shape: dimensions, -1 for an unknown size; nullopt for an unknown rank.
using SpecShape = std::optional<std::vector<int64_t>>;

struct SignatureSpec {
  std::string name;
  tensorflow::DataType dtype = tensorflow::DT_INVALID;
  SpecShape shape;
};

// The specs of `signature`, flattened. INVALID_ARGUMENT if a leaf is not a
// tensor spec (or bounded tensor spec).
REVERB_EXPORT absl::StatusOr<std::vector<SignatureSpec>> FlattenSignature(
    const tensorflow::StructuredValue& signature);

// Whether a tensor of shape `a` may have shape `b` (ranks and known sizes
// agree; an unknown rank is compatible with everything).
REVERB_EXPORT bool ShapesCompatible(const SpecShape& a, const SpecShape& b);

// TensorFlow's name of a dtype: "float", "double", "int64", "string", ...
// ("unknown dtype enum (N)" for a value the enum does not name).
REVERB_EXPORT std::string DataTypeName(tensorflow::DataType dtype);

// "[?,2]", "[]", or "<unknown>".
REVERB_EXPORT std::string ShapeString(const SpecShape& shape);

// "0: Tensor<name: 'a', dtype: float, shape: [2]>, 1: ..."
REVERB_EXPORT std::string DescribeSignature(
    const std::vector<SignatureSpec>& specs);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_TENSOR_SIGNATURE_H_
