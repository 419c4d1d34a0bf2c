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
    case tensorflow::DT_BOOL: return "bool";
    case tensorflow::DT_HALF: return "float16";
    case tensorflow::DT_FLOAT: return "float32";
    case tensorflow::DT_DOUBLE: return "float64";
    case tensorflow::DT_INT8: return "int8";
    case tensorflow::DT_INT16: return "int16";
    case tensorflow::DT_INT32: return "int32";
    case tensorflow::DT_INT64: return "int64";
    case tensorflow::DT_UINT8: return "uint8";
    case tensorflow::DT_UINT16: return "uint16";
    case tensorflow::DT_UINT32: return "uint32";
    case tensorflow::DT_UINT64: return "uint64";
    case tensorflow::DT_COMPLEX64: return "complex64";
    case tensorflow::DT_COMPLEX128: return "complex128";
    default: return nullptr;
  }
}

}  // namespace

absl::StatusOr<Tensor> TensorFromNumpy(py::handle object) {
  py::array array;
  if (py::isinstance<py::array>(object) &&
      (py::reinterpret_borrow<py::array>(object).flags() &
       py::array::c_style)) {
    array = py::reinterpret_borrow<py::array>(object);  // The common case.
  } else {
    static py::object* asarray = new py::object(
        py::module_::import("numpy").attr("asarray"));
    array = (*asarray)(object, py::arg("order") = "C");
  }
  auto dtype = DataTypeOf(array.dtype());
  if (!dtype.ok()) return dtype.status();
  Tensor tensor;
  tensor.dtype = *dtype;
  tensor.shape.assign(array.shape(), array.shape() + array.ndim());
  if (tensor.IsString()) {
    py::list items = array.attr("ravel")().attr("tolist")();
    tensor.strings.reserve(items.size());
    for (const auto& item : items) {
      if (PyBytes_Check(item.ptr())) {
        tensor.strings.emplace_back(item.cast<std::string>());
      } else if (PyUnicode_Check(item.ptr())) {
        tensor.strings.emplace_back(item.cast<std::string>());
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "String tensors take str or bytes elements, got ",
            std::string(py::str(item.get_type())), "."));
      }
    }
    return tensor;
  }
  if (!array.dtype().attr("isnative").cast<bool>()) {
    array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  }
  // A large step gets a recycled buffer (see buffer_pool.h).
  tensor.bytes = BufferPool::Default().Reserve(array.nbytes());
  tensor.bytes.append(static_cast<const char*>(array.data()), array.nbytes());
  return tensor;
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
  // The array keeps the buffer alive through a capsule: no copy.
  auto* owner = new std::string(std::move(tensor.bytes));
  py::capsule base(owner, [](void* p) { delete static_cast<std::string*>(p); });
  return py::array(dtype, shape, owner->data(), base);
}

}  // namespace deepmind::reverb
