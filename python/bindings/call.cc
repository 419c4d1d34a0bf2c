#include "python/bindings/call.h"

#include <stdexcept>

namespace py = pybind11;

namespace deepmind::reverb {

void RaiseFromStatus(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      throw py::value_error(message);
    case absl::StatusCode::kResourceExhausted:
      throw py::index_error(message);
    case absl::StatusCode::kUnimplemented:
      PyErr_SetString(PyExc_NotImplementedError, message.c_str());
      throw py::error_already_set();
    case absl::StatusCode::kDeadlineExceeded: {
      py::object error =
          py::module_::import("reverb.errors").attr("DeadlineExceededError");
      PyErr_SetString(error.ptr(), message.c_str());
      throw py::error_already_set();
    }
    default:  // The message alone, as dm-reverb.
      throw std::runtime_error(message);
  }
}

absl::Duration TimeoutFromMs(std::optional<int64_t> timeout_ms) {
  if (!timeout_ms.has_value() || *timeout_ms < 0) {
    return absl::InfiniteDuration();
  }
  return absl::Milliseconds(*timeout_ms);
}

std::vector<KeyWithPriority> PriorityUpdates(
    const std::vector<std::pair<uint64_t, double>>& updates) {
  std::vector<KeyWithPriority> protos(updates.size());
  for (size_t i = 0; i < updates.size(); ++i) {
    protos[i].set_key(updates[i].first);
    protos[i].set_priority(updates[i].second);
  }
  return protos;
}

}  // namespace deepmind::reverb
