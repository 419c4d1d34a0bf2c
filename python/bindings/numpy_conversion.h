// numpy <-> Tensor for the bindings (GIL held).
//
// Numeric arrays are viewed where they are (NumpyView) or copied once into
// a Tensor; Tensors become arrays without a copy (the array owns the
// Tensor's buffer, and gives a large one back to BufferPool::Default() when
// it is freed). Strings: numpy
// unicode, bytes and object arrays (of str or bytes) become DT_STRING
// (str is UTF-8 encoded); DT_STRING comes back as an object array of bytes.
// Supported dtypes: float16/32/64, int8/16/32/64, uint8/16/32/64, bool,
// complex64/128 and strings.
#ifndef REVERB_PYTHON_BINDINGS_NUMPY_CONVERSION_H_
#define REVERB_PYTHON_BINDINGS_NUMPY_CONVERSION_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cc/tensor/tensor.h"

namespace deepmind::reverb {

// An array as a TensorView, for a call that does not keep the view: a
// C-contiguous array of native byte order is viewed where it is (and kept
// alive), anything else np.asarray accepts is converted first; strings are
// converted. Make and destroy it with the GIL held; the view may be used
// without the GIL.
class NumpyView {
 public:
  // INVALID_ARGUMENT for unsupported dtypes; throws pybind11::type_error
  // for object arrays holding anything but str and bytes.
  static absl::StatusOr<NumpyView> Of(pybind11::handle object);

  const TensorView& view() const { return view_; }
  // The data as an owned Tensor (numeric data copied); the view is reset.
  Tensor ToTensor() &&;

 private:
  pybind11::array array_;
  std::vector<std::string> strings_;
  TensorView view_;
};

// NumpyView::Of(object) as a Tensor.
absl::StatusOr<Tensor> TensorFromNumpy(pybind11::handle object);

pybind11::object TensorToNumpy(Tensor tensor);

// The numpy dtype of a tensor dtype (object for strings); ValueError if none.
pybind11::dtype NumpyDtype(tensorflow::DataType dtype);

}  // namespace deepmind::reverb

#endif  // REVERB_PYTHON_BINDINGS_NUMPY_CONVERSION_H_
