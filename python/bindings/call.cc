#include "python/bindings/call.h"

#include <string>

namespace py = pybind11;

namespace deepmind::reverb {

namespace {

// The Python exception type of a failed status (see call.h).
py::object ExceptionType(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return py::reinterpret_borrow<py::object>(PyExc_ValueError);
    case absl::StatusCode::kResourceExhausted:
      return py::reinterpret_borrow<py::object>(PyExc_IndexError);
    case absl::StatusCode::kUnimplemented:
      return py::reinterpret_borrow<py::object>(PyExc_NotImplementedError);
    case absl::StatusCode::kDeadlineExceeded:
      return py::module_::import("reverb.errors").attr("DeadlineExceededError");
    default:
      return py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  }
}

}  // namespace

py::object ExceptionFromStatus(const absl::Status& status) {
  // The message alone, as dm-reverb.
  return ExceptionType(status.code())(std::string(status.message()));
}

void RaiseFromStatus(const absl::Status& status) {
  const std::string message(status.message());
  PyErr_SetString(ExceptionType(status.code()).ptr(), message.c_str());
  throw py::error_already_set();
}

absl::Duration TimeoutFromMs(std::optional<int64_t> timeout_ms) {
  if (!timeout_ms.has_value() || *timeout_ms < 0) {
    return absl::InfiniteDuration();
  }
  return absl::Milliseconds(*timeout_ms);
}

PriorityArrays PriorityUpdates(
    const std::vector<std::pair<uint64_t, double>>& updates) {
  PriorityArrays arrays;
  arrays.keys.reserve(updates.size());
  arrays.priorities.reserve(updates.size());
  for (const auto& [key, priority] : updates) {
    arrays.keys.push_back(key);
    arrays.priorities.push_back(priority);
  }
  return arrays;
}

}  // namespace deepmind::reverb
