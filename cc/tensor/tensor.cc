#include "cc/tensor/tensor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cc/support/buffer_pool.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {

using tensorflow::DataType;

namespace {

int64_t Product(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t dim : dims) n *= dim;
  return n;
}

}  // namespace

int64_t Tensor::NumElements() const { return Product(shape); }

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

TensorView::TensorView(const Tensor& tensor)
    : dtype(tensor.dtype),
      shape(tensor.shape.begin(), tensor.shape.end()),
      bytes(tensor.bytes),
      strings(tensor.strings) {}

int64_t TensorView::NumElements() const { return Product(shape); }

std::string DescribeTensor(const TensorView& tensor) {
  return absl::StrCat(tensorflow::DataType_Name(tensor.dtype), "[",
                      absl::StrJoin(tensor.shape, ","), "]");
}

namespace {

absl::Status CheckRank1(const TensorView& tensor) {
  if (tensor.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Expected a tensor of rank >= 1, got ", DescribeTensor(tensor), "."));
  }
  return absl::OkStatus();
}

// Elements per row (product of the trailing dimensions).
int64_t RowElements(const TensorView& tensor) {
  return Product(absl::MakeConstSpan(tensor.shape).subspan(1));
}

}  // namespace

absl::Status CheckElements(const TensorView& tensor) {
  for (int64_t dim : tensor.shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Tensor ", DescribeTensor(tensor), " has a negative dimension."));
    }
  }
  if (tensor.IsString()) {
    if (static_cast<int64_t>(tensor.strings.size()) != tensor.NumElements()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Tensor ", DescribeTensor(tensor), " holds ",
                       tensor.strings.size(), " strings."));
    }
    return absl::OkStatus();
  }
  REVERB_ASSIGN_OR_RETURN(const int element_size, DataTypeSize(tensor.dtype));
  if (tensor.bytes.size() !=
      static_cast<size_t>(tensor.NumElements() * element_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Tensor ", DescribeTensor(tensor), " holds ",
                     tensor.bytes.size(), " bytes."));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> ViewRows(const TensorView& tensor, int64_t offset,
                                    int64_t length) {
  REVERB_RETURN_IF_ERROR(CheckRank1(tensor));
  REVERB_RETURN_IF_ERROR(CheckElements(tensor));
  if (offset < 0 || length < 0 || offset > tensor.shape[0] - length) {
    return absl::InvalidArgumentError(
        absl::StrCat("Rows [", offset, ", ", offset + length,
                     ") are out of range for ", DescribeTensor(tensor), "."));
  }
  TensorView out = tensor;
  out.shape[0] = length;
  const int64_t row_elements = RowElements(tensor);
  if (tensor.IsString()) {
    out.strings =
        tensor.strings.subspan(offset * row_elements, length * row_elements);
  } else {
    const int64_t row_bytes = row_elements * DataTypeSize(tensor.dtype).value();
    out.bytes = tensor.bytes.substr(offset * row_bytes, length * row_bytes);
  }
  return out;
}

absl::Status AppendRows(const TensorView& rows, Tensor* tensor) {
  REVERB_RETURN_IF_ERROR(CheckRank1(rows));
  REVERB_RETURN_IF_ERROR(CheckElements(rows));
  if (tensor->dtype == tensorflow::DT_INVALID) {
    tensor->dtype = rows.dtype;
    tensor->shape.assign(rows.shape.begin(), rows.shape.end());
    tensor->shape[0] = 0;
  } else if (tensor->dtype != rows.dtype || tensor->shape.empty() ||
             !std::equal(tensor->shape.begin() + 1, tensor->shape.end(),
                         rows.shape.begin() + 1, rows.shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Cannot append rows of ", DescribeTensor(rows), " to ",
        DescribeTensor(*tensor), ": dtypes or row shapes differ."));
  }
  tensor->shape[0] += rows.shape[0];
  if (rows.IsString()) {
    tensor->strings.insert(tensor->strings.end(), rows.strings.begin(),
                           rows.strings.end());
  } else {
    tensor->bytes.append(rows.bytes.data(), rows.bytes.size());
  }
  return absl::OkStatus();
}

Tensor CopyTensor(const TensorView& tensor) {
  Tensor copy;
  copy.dtype = tensor.dtype;
  copy.shape.assign(tensor.shape.begin(), tensor.shape.end());
  if (tensor.IsString()) {
    copy.strings.assign(tensor.strings.begin(), tensor.strings.end());
  } else {
    copy.bytes = BufferPool::Default().Reserve(tensor.bytes.size());
    copy.bytes.append(tensor.bytes.data(), tensor.bytes.size());
  }
  return copy;
}

absl::StatusOr<Tensor> StackTensors(std::vector<Tensor> tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("Cannot stack zero tensors.");
  }
  if (tensors.size() == 1) {
    Tensor out = std::move(tensors.front());
    out.shape.insert(out.shape.begin(), 1);
    return out;
  }
  size_t total_bytes = 0;
  for (const Tensor& t : tensors) total_bytes += t.bytes.size();
  Tensor out;
  // Large steps: the rows' buffers are recycled (see buffer_pool.h).
  out.bytes = BufferPool::Default().Reserve(total_bytes);
  for (Tensor& t : tensors) {
    if (t.shape != tensors.front().shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Cannot stack tensors of different shapes: ",
          DescribeTensor(tensors.front()), " and ", DescribeTensor(t), "."));
    }
    TensorView row = t;
    row.shape.insert(row.shape.begin(), 1);
    REVERB_RETURN_IF_ERROR(AppendRows(row, &out));
    BufferPool::Default().Give(std::move(t.bytes));
  }
  return out;
}

absl::StatusOr<Tensor> ConcatRows(std::vector<Tensor> tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("Cannot concatenate zero tensors.");
  }
  for (const Tensor& t : tensors) REVERB_RETURN_IF_ERROR(CheckRank1(t));
  if (tensors.size() == 1) return std::move(tensors[0]);
  size_t total_bytes = 0;
  for (const Tensor& t : tensors) total_bytes += t.bytes.size();
  Tensor out;
  out.bytes.reserve(total_bytes);
  for (const Tensor& t : tensors) REVERB_RETURN_IF_ERROR(AppendRows(t, &out));
  return out;
}

absl::StatusOr<Tensor> SliceRows(const TensorView& tensor, int64_t offset,
                                 int64_t length) {
  REVERB_ASSIGN_OR_RETURN(TensorView rows, ViewRows(tensor, offset, length));
  Tensor out;
  REVERB_RETURN_IF_ERROR(AppendRows(rows, &out));
  return out;
}

absl::StatusOr<Tensor> GetRow(const TensorView& tensor, int64_t row) {
  REVERB_ASSIGN_OR_RETURN(Tensor out, SliceRows(tensor, row, 1));
  out.shape.erase(out.shape.begin());
  return out;
}

}  // namespace deepmind::reverb
