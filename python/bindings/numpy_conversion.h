// numpy <-> Tensor for the bindings (GIL held).
//
// Numeric arrays are copied once into the Tensor; Tensors become arrays
// without a copy (the array owns the Tensor's buffer). Strings: numpy
// unicode, bytes and object arrays (of str or bytes) become DT_STRING
// (str is UTF-8 encoded); DT_STRING comes back as an object array of bytes.
// Supported dtypes: float16/32/64, int8/16/32/64, uint8/16/32/64, bool,
// complex64/128 and strings.
#ifndef REVERB_PYTHON_BINDINGS_NUMPY_CONVERSION_H_
#define REVERB_PYTHON_BINDINGS_NUMPY_CONVERSION_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "absl/status/statusor.h"
#include "cc/tensor.h"

namespace deepmind::reverb {

// Anything np.asarray accepts. INVALID_ARGUMENT for unsupported dtypes.
absl::StatusOr<Tensor> TensorFromNumpy(pybind11::handle object);

pybind11::object TensorToNumpy(Tensor tensor);

// The numpy dtype of a tensor dtype (object for strings); ValueError if none.
pybind11::dtype NumpyDtype(tensorflow::DataType dtype);

}  // namespace deepmind::reverb

#endif  // REVERB_PYTHON_BINDINGS_NUMPY_CONVERSION_H_
