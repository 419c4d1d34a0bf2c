// How a binding calls libreverb (GIL held unless said otherwise).
//
// Errors: a failed absl::Status becomes a Python exception, mapped as
// dm-reverb maps them: INVALID_ARGUMENT -> ValueError, RESOURCE_EXHAUSTED ->
// IndexError, UNIMPLEMENTED -> NotImplementedError, DEADLINE_EXCEEDED ->
// reverb.errors.DeadlineExceededError, anything else -> RuntimeError (the
// message alone, as dm-reverb).
//
// The GIL: every call that can block or take a table lock runs without it,
// through RunWithoutGil, a py::gil_scoped_release block or
// py::call_guard<py::gil_scoped_release>.
//
// Arguments: timeouts arrive in milliseconds (TimeoutFromMs), priority
// updates as (key, priority) pairs (PriorityUpdates).
#ifndef REVERB_PYTHON_BINDINGS_CALL_H_
#define REVERB_PYTHON_BINDINGS_CALL_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cc/core/table.h"
#include "cc/support/quiet_parse.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// Throws the Python exception of a failed `status`.
[[noreturn]] void RaiseFromStatus(const absl::Status& status);

// The exception RaiseFromStatus would throw, as an object (for results that
// carry one error per server).
pybind11::object ExceptionFromStatus(const absl::Status& status);

inline void MaybeRaise(const absl::Status& status) {
  if (!status.ok()) RaiseFromStatus(status);
}

template <typename T>
T ValueOrRaise(absl::StatusOr<T> status_or) {
  if (!status_or.ok()) RaiseFromStatus(status_or.status());
  return std::move(status_or).value();
}

// `bytes` parsed as a `Message`; ValueError ("Could not parse <what>.") if
// they are not one.
template <typename Message>
Message ParseOrRaise(const std::string& bytes, const char* what) {
  Message message;
  if (!ParseQuietly(bytes, &message)) {
    throw pybind11::value_error(absl::StrCat("Could not parse ", what, "."));
  }
  return message;
}

// Runs `fn` without the GIL and raises its error. `fn` returns an
// absl::Status, or an absl::StatusOr<T>, whose value RunWithoutGil returns
// (with the GIL held again).
template <typename Fn>
auto RunWithoutGil(Fn&& fn) {
  auto result = [&] {
    pybind11::gil_scoped_release release;
    return fn();
  }();
  if constexpr (std::is_same_v<decltype(result), absl::Status>) {
    MaybeRaise(result);
  } else {
    return ValueOrRaise(std::move(result));
  }
}

// None or a negative number means "no timeout".
absl::Duration TimeoutFromMs(std::optional<int64_t> timeout_ms);

// (key, priority) pairs as the arrays MutateItems and MutatePriorities take.
PriorityArrays PriorityUpdates(
    const std::vector<std::pair<uint64_t, double>>& updates);

}  // namespace deepmind::reverb

#endif  // REVERB_PYTHON_BINDINGS_CALL_H_
