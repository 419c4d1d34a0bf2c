// Tensor: a dense, row-major, host-memory array with a TensorFlow dtype.
//
// The client side of Reverb moves step data through this type: writers
// stack steps into chunk columns, samplers slice and concatenate columns.
// It is deliberately small: numeric elements are raw bytes in one buffer,
// strings are one std::string per element. No TensorFlow dependency.
#ifndef REVERB_CC_TENSOR_H_
#define REVERB_CC_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "tensorflow/core/framework/types.pb.h"

namespace deepmind::reverb {

struct REVERB_EXPORT Tensor {
  tensorflow::DataType dtype = tensorflow::DT_INVALID;
  std::vector<int64_t> shape;
  // Elements of a numeric tensor, row-major (NumElements() * element size).
  std::string bytes;
  // Elements of a DT_STRING tensor, row-major.
  std::vector<std::string> strings;

  int64_t NumElements() const;
  // Length of the leading dimension (1 for a scalar).
  int64_t NumRows() const;
  bool IsString() const { return dtype == tensorflow::DT_STRING; }
};

// Bytes per element of a numeric dtype; INVALID_ARGUMENT for strings and
// dtypes without a fixed-size host representation.
REVERB_EXPORT absl::StatusOr<int> DataTypeSize(tensorflow::DataType dtype);

// "DT_FLOAT[2,3]"-style description for error messages.
REVERB_EXPORT std::string DescribeTensor(const Tensor& tensor);

// Stacks tensors of one dtype and shape along a new leading dimension (a
// single tensor is moved, not copied).
REVERB_EXPORT absl::StatusOr<Tensor> StackTensors(std::vector<Tensor> tensors);

// Concatenates tensors of one dtype and trailing shape along dimension 0.
REVERB_EXPORT absl::StatusOr<Tensor> ConcatRows(std::vector<Tensor> tensors);

// Rows [offset, offset + length) of a tensor of rank >= 1.
REVERB_EXPORT absl::StatusOr<Tensor> SliceRows(const Tensor& tensor,
                                               int64_t offset, int64_t length);

// Row `row` of a tensor of rank >= 1, without the leading dimension.
REVERB_EXPORT absl::StatusOr<Tensor> GetRow(const Tensor& tensor, int64_t row);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_TENSOR_H_
