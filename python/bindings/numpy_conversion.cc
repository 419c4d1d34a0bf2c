#include "python/bindings/numpy_conversion.h"

#include <pybind11/numpy.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cc/support/buffer_pool.h"

namespace py = pybind11;

namespace deepmind::reverb {
namespace {

using tensorflow::DataType;

absl::StatusOr<DataType> DataTypeOf(const py::dtype& dtype) {
  const char kind = dtype.kind();
  const ssize_t size = dtype.itemsize();
  switch (kind) {
    case 'b':
      return tensorflow::DT_BOOL;
    case 'f':
      if (size == 2) return tensorflow::DT_HALF;
      if (size == 4) return tensorflow::DT_FLOAT;
      if (size == 8) return tensorflow::DT_DOUBLE;
      break;
    case 'i':
      if (size == 1) return tensorflow::DT_INT8;
      if (size == 2) return tensorflow::DT_INT16;
      if (size == 4) return tensorflow::DT_INT32;
      if (size == 8) return tensorflow::DT_INT64;
      break;
    case 'u':
      if (size == 1) return tensorflow::DT_UINT8;
      if (size == 2) return tensorflow::DT_UINT16;
      if (size == 4) return tensorflow::DT_UINT32;
      if (size == 8) return tensorflow::DT_UINT64;
      break;
    case 'c':
      if (size == 8) return tensorflow::DT_COMPLEX64;
      if (size == 16) return tensorflow::DT_COMPLEX128;
      break;
    case 'U':
    case 'S':
    case 'O':
      return tensorflow::DT_STRING;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "Unsupported numpy dtype ", std::string(py::str(dtype)), "."));
}

const char* NumpyName(DataType dtype) {
  switch (dtype) {
    case tensorflow::DT_BOOL:
      return "bool";
    case tensorflow::DT_HALF:
      return "float16";
    case tensorflow::DT_FLOAT:
      return "float32";
    case tensorflow::DT_DOUBLE:
      return "float64";
    case tensorflow::DT_INT8:
      return "int8";
    case tensorflow::DT_INT16:
      return "int16";
    case tensorflow::DT_INT32:
      return "int32";
    case tensorflow::DT_INT64:
      return "int64";
    case tensorflow::DT_UINT8:
      return "uint8";
    case tensorflow::DT_UINT16:
      return "uint16";
    case tensorflow::DT_UINT32:
      return "uint32";
    case tensorflow::DT_UINT64:
      return "uint64";
    case tensorflow::DT_COMPLEX64:
      return "complex64";
    case tensorflow::DT_COMPLEX128:
      return "complex128";
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusOr<NumpyView> NumpyView::Of(py::handle object) {
  NumpyView result;
  if (py::isinstance<py::array>(object) &&
      (py::reinterpret_borrow<py::array>(object).flags() &
       py::array::c_style)) {
    result.array_ = py::reinterpret_borrow<py::array>(object);  // Common.
  } else {
    static py::object* asarray =
        new py::object(py::module_::import("numpy").attr("asarray"));
    result.array_ = (*asarray)(object, py::arg("order") = "C");
  }
  py::array& array = result.array_;
  auto dtype = DataTypeOf(array.dtype());
  if (!dtype.ok()) return dtype.status();
  TensorView& view = result.view_;
  view.dtype = *dtype;
  view.shape.assign(array.shape(), array.shape() + array.ndim());
  if (view.IsString()) {
    py::list items = array.attr("ravel")().attr("tolist")();
    result.strings_.reserve(items.size());
    for (const auto& item : items) {
      if (!PyBytes_Check(item.ptr()) && !PyUnicode_Check(item.ptr())) {
        // TypeError, as dm-reverb (whose argument conversion fails).
        throw py::type_error(
            absl::StrCat("String tensors take str or bytes elements, got ",
                         std::string(py::str(item.get_type())), "."));
      }
      result.strings_.emplace_back(item.cast<std::string>());
    }
    view.strings = result.strings_;
    return result;
  }
  if (!array.dtype().attr("isnative").cast<bool>()) {
    array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  }
  view.bytes =
      absl::string_view(static_cast<const char*>(array.data()), array.nbytes());
  return result;
}

Tensor NumpyView::ToTensor() && {
  Tensor tensor;
  if (view_.IsString()) {
    tensor.dtype = view_.dtype;
    tensor.shape.assign(view_.shape.begin(), view_.shape.end());
    tensor.strings = std::move(strings_);
  } else {
    tensor = CopyTensor(view_);
  }
  view_ = TensorView();
  return tensor;
}

absl::StatusOr<Tensor> TensorFromNumpy(py::handle object) {
  auto view = NumpyView::Of(object);
  if (!view.ok()) return view.status();
  return std::move(*view).ToTensor();
}

py::dtype NumpyDtype(DataType dtype) {
  if (dtype == tensorflow::DT_STRING) return py::dtype("O");
  const char* name = NumpyName(dtype);
  if (name == nullptr) {
    throw py::value_error(absl::StrCat("No numpy dtype for ",
                                       tensorflow::DataType_Name(dtype), "."));
  }
  return py::dtype(name);
}

py::object TensorToNumpy(Tensor tensor) {
  std::vector<ssize_t> shape(tensor.shape.begin(), tensor.shape.end());
  if (tensor.IsString()) {
    py::array result(py::dtype("O"), shape);
    py::object flat = result.attr("reshape")(-1);
    for (size_t i = 0; i < tensor.strings.size(); ++i) {
      flat[py::int_(i)] = py::bytes(tensor.strings[i]);
    }
    return std::move(result);
  }
  py::dtype dtype = NumpyDtype(tensor.dtype);
  // The array keeps the buffer alive through a capsule: no copy. When numpy
  // frees it, a large buffer goes back to the pool for the next batch.
  auto* owner = new std::string(std::move(tensor.bytes));
  py::capsule base(owner, [](void* p) {
    auto* buffer = static_cast<std::string*>(p);
    BufferPool::Default().Give(std::move(*buffer));
    delete buffer;
  });
  return py::array(dtype, shape, owner->data(), base);
}

}  // namespace deepmind::reverb
