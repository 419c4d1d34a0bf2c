#include "cc/tensor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cc/support/buffer_pool.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {

using tensorflow::DataType;

int64_t Tensor::NumElements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

int64_t Tensor::NumRows() const { return shape.empty() ? 1 : shape[0]; }

absl::StatusOr<int> DataTypeSize(DataType dtype) {
  switch (dtype) {
    case tensorflow::DT_BOOL:
    case tensorflow::DT_INT8:
    case tensorflow::DT_UINT8:
    case tensorflow::DT_QINT8:
    case tensorflow::DT_QUINT8:
    case tensorflow::DT_FLOAT8_E5M2:
    case tensorflow::DT_FLOAT8_E4M3FN:
      return 1;
    case tensorflow::DT_INT16:
    case tensorflow::DT_UINT16:
    case tensorflow::DT_HALF:
    case tensorflow::DT_BFLOAT16:
    case tensorflow::DT_QINT16:
    case tensorflow::DT_QUINT16:
      return 2;
    case tensorflow::DT_INT32:
    case tensorflow::DT_UINT32:
    case tensorflow::DT_FLOAT:
    case tensorflow::DT_QINT32:
      return 4;
    case tensorflow::DT_INT64:
    case tensorflow::DT_UINT64:
    case tensorflow::DT_DOUBLE:
    case tensorflow::DT_COMPLEX64:
      return 8;
    case tensorflow::DT_COMPLEX128:
      return 16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "Unsupported tensor dtype ", tensorflow::DataType_Name(dtype), "."));
  }
}

std::string DescribeTensor(const Tensor& tensor) {
  return absl::StrCat(tensorflow::DataType_Name(tensor.dtype), "[",
                      absl::StrJoin(tensor.shape, ","), "]");
}

namespace {

absl::Status CheckRank1(const Tensor& tensor) {
  if (tensor.shape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected a tensor of rank >= 1, got ",
                     DescribeTensor(tensor), "."));
  }
  return absl::OkStatus();
}

// Elements per row (product of the trailing dimensions).
int64_t RowElements(const Tensor& tensor) {
  int64_t n = 1;
  for (size_t i = 1; i < tensor.shape.size(); ++i) n *= tensor.shape[i];
  return n;
}

}  // namespace

absl::StatusOr<Tensor> StackTensors(std::vector<Tensor> tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("Cannot stack zero tensors.");
  }
  if (tensors.size() == 1) {
    Tensor out = std::move(tensors.front());
    out.shape.insert(out.shape.begin(), 1);
    return out;
  }
  const Tensor& first = tensors[0];
  Tensor out;
  out.dtype = first.dtype;
  out.shape.push_back(static_cast<int64_t>(tensors.size()));
  out.shape.insert(out.shape.end(), first.shape.begin(), first.shape.end());
  size_t total_bytes = 0;
  for (const Tensor& t : tensors) {
    if (t.dtype != first.dtype || t.shape != first.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Cannot stack tensors of different dtypes or shapes: ",
          DescribeTensor(first), " and ", DescribeTensor(t), "."));
    }
    total_bytes += t.bytes.size();
  }
  if (first.IsString()) {
    out.strings.reserve(first.strings.size() * tensors.size());
    for (const Tensor& t : tensors) {
      out.strings.insert(out.strings.end(), t.strings.begin(), t.strings.end());
    }
  } else {
    // Large steps: the rows' buffers are recycled (see buffer_pool.h).
    out.bytes = BufferPool::Default().Reserve(total_bytes);
    for (Tensor& t : tensors) {
      out.bytes.append(t.bytes);
      BufferPool::Default().Give(std::move(t.bytes));
    }
  }
  return out;
}

absl::StatusOr<Tensor> ConcatRows(std::vector<Tensor> tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("Cannot concatenate zero tensors.");
  }
  for (const Tensor& t : tensors) REVERB_RETURN_IF_ERROR(CheckRank1(t));
  if (tensors.size() == 1) return std::move(tensors[0]);
  Tensor out;
  out.dtype = tensors[0].dtype;
  out.shape = tensors[0].shape;
  out.shape[0] = 0;
  size_t total_bytes = 0;
  for (const Tensor& t : tensors) {
    if (t.dtype != out.dtype ||
        !std::equal(t.shape.begin() + 1, t.shape.end(), out.shape.begin() + 1,
                    out.shape.end())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Cannot concatenate tensors of different dtypes or row shapes: ",
          DescribeTensor(tensors[0]), " and ", DescribeTensor(t), "."));
    }
    out.shape[0] += t.shape[0];
    total_bytes += t.bytes.size();
  }
  if (out.IsString()) {
    for (Tensor& t : tensors) {
      for (std::string& s : t.strings) out.strings.push_back(std::move(s));
    }
  } else {
    out.bytes.reserve(total_bytes);
    for (const Tensor& t : tensors) out.bytes.append(t.bytes);
  }
  return out;
}

absl::StatusOr<Tensor> SliceRows(const Tensor& tensor, int64_t offset,
                                 int64_t length) {
  REVERB_RETURN_IF_ERROR(CheckRank1(tensor));
  if (offset < 0 || length < 0 || offset + length > tensor.shape[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("Rows [", offset, ", ", offset + length,
                     ") are out of range for ", DescribeTensor(tensor), "."));
  }
  Tensor out;
  out.dtype = tensor.dtype;
  out.shape = tensor.shape;
  out.shape[0] = length;
  const int64_t row_elements = RowElements(tensor);
  if (tensor.IsString()) {
    out.strings.assign(tensor.strings.begin() + offset * row_elements,
                       tensor.strings.begin() + (offset + length) * row_elements);
  } else {
    REVERB_ASSIGN_OR_RETURN(const int element_size, DataTypeSize(tensor.dtype));
    const int64_t row_bytes = row_elements * element_size;
    out.bytes = tensor.bytes.substr(offset * row_bytes, length * row_bytes);
  }
  return out;
}

absl::StatusOr<Tensor> GetRow(const Tensor& tensor, int64_t row) {
  REVERB_ASSIGN_OR_RETURN(Tensor out, SliceRows(tensor, row, 1));
  out.shape.erase(out.shape.begin());
  return out;
}

}  // namespace deepmind::reverb
