#include "cc/support/log.h"

#include <pybind11/pybind11.h>

#include <string>

#include "python/bindings/bind.h"

namespace py = pybind11;

namespace deepmind::reverb {
namespace {

bool PythonIsGoing() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

}  // namespace

void BindLog(py::module_& m) {
  m.def(
      "set_log_sink",
      [](py::object sink) {
        if (sink.is_none()) {
          SetLogSink(nullptr);
          return;
        }
        // Never released: a line logged on another thread may still be on
        // its way to the sink when it is replaced, and dropping the last
        // reference there would need the GIL.
        PyObject* callable = sink.release().ptr();
        SetLogSink([callable](LogSeverity severity, absl::string_view line) {
          if (PythonIsGoing()) return;
          py::gil_scoped_acquire gil;
          try {
            const py::handle log(callable);
            log(static_cast<int>(severity), std::string(line));
          } catch (py::error_already_set& error) {
            error.discard_as_unraisable("reverb log sink");
          }
        });
      },
      py::arg("sink"));
}

}  // namespace deepmind::reverb
