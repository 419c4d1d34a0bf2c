// Tensor: a dense, row-major, host-memory array with a TensorFlow dtype.
//
// The client side of Reverb moves step data through this type: writers
// stack steps into chunk columns, samplers slice and concatenate columns.
// It is deliberately small: numeric elements are raw bytes in one buffer,
// strings are one std::string per element. No TensorFlow dependency.
#ifndef REVERB_CC_TENSOR_TENSOR_H_
#define REVERB_CC_TENSOR_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// A tensor's dtype, shape and elements, viewed where they are. Writers take
// step data as views, so that it is copied only if it has to wait in a
// buffer: a large step that makes a chunk on its own is compressed straight
// from the caller's memory. A view owns nothing; what it views must outlive
// it (a view of a temporary Tensor, like a string_view of a temporary
// string, lasts until the end of the full expression).
struct REVERB_EXPORT TensorView {
  TensorView() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): converts like string_view.
  TensorView(const Tensor& tensor);

  tensorflow::DataType dtype = tensorflow::DT_INVALID;
  absl::InlinedVector<int64_t, 4> shape;
  // Elements of a numeric tensor, row-major.
  absl::string_view bytes;
  // Elements of a DT_STRING tensor, row-major.
  absl::Span<const std::string> strings;

  int64_t NumElements() const;
  bool IsString() const { return dtype == tensorflow::DT_STRING; }
};

// Bytes per element of a numeric dtype; INVALID_ARGUMENT for strings and
// dtypes without a fixed-size host representation.
REVERB_EXPORT absl::StatusOr<int> DataTypeSize(tensorflow::DataType dtype);

// "DT_FLOAT[2,3]"-style description for error messages.
REVERB_EXPORT std::string DescribeTensor(const TensorView& tensor);

// INVALID_ARGUMENT unless `tensor` holds as many elements as its shape says
// (bytes of a numeric dtype, or strings).
REVERB_EXPORT absl::Status CheckElements(const TensorView& tensor);

// Rows [offset, offset + length) of a tensor of rank >= 1, viewed.
REVERB_EXPORT absl::StatusOr<TensorView> ViewRows(const TensorView& tensor,
                                                  int64_t offset,
                                                  int64_t length);

// Appends (copies) the rows of `rows` (rank >= 1) to `tensor`, which has
// their dtype and row shape, or is a new Tensor (DT_INVALID) and takes them;
// its `bytes` may already have room reserved.
REVERB_EXPORT absl::Status AppendRows(const TensorView& rows, Tensor* tensor);

// A tensor of its own holding a copy of `tensor`'s elements; large numeric
// data goes into a recycled buffer (see buffer_pool.h).
REVERB_EXPORT Tensor CopyTensor(const TensorView& tensor);

// Stacks tensors of one dtype and shape along a new leading dimension (a
// single tensor is moved, not copied).
REVERB_EXPORT absl::StatusOr<Tensor> StackTensors(std::vector<Tensor> tensors);

// Concatenates tensors of one dtype and trailing shape along dimension 0.
REVERB_EXPORT absl::StatusOr<Tensor> ConcatRows(std::vector<Tensor> tensors);

// Rows [offset, offset + length) of a tensor of rank >= 1, copied.
REVERB_EXPORT absl::StatusOr<Tensor> SliceRows(const TensorView& tensor,
                                               int64_t offset, int64_t length);

// Row `row` of a tensor of rank >= 1, without the leading dimension.
REVERB_EXPORT absl::StatusOr<Tensor> GetRow(const TensorView& tensor,
                                            int64_t row);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_TENSOR_TENSOR_H_
