// Macros that keep status-returning code flat.
//
//   REVERB_RETURN_IF_ERROR(DoSomething());
//   REVERB_ASSIGN_OR_RETURN(auto value, ComputeValue());
#ifndef REVERB_CC_SUPPORT_STATUS_MACROS_H_
#define REVERB_CC_SUPPORT_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define REVERB_STATUS_CONCAT_INNER_(a, b) a##b
#define REVERB_STATUS_CONCAT_(a, b) REVERB_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function unless it is OK.
#define REVERB_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status reverb_status_ = (expr);          \
    if (!reverb_status_.ok()) return reverb_status_; \
  } while (false)

// Evaluates `expr` (an absl::StatusOr<T>); returns its status if it is an
// error, otherwise moves the value into `lhs` (which may declare a variable).
#define REVERB_ASSIGN_OR_RETURN(lhs, expr) \
  REVERB_ASSIGN_OR_RETURN_IMPL_(           \
      REVERB_STATUS_CONCAT_(reverb_statusor_, __LINE__), lhs, expr)

#define REVERB_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return statusor.status();            \
  lhs = std::move(statusor).value()

#endif  // REVERB_CC_SUPPORT_STATUS_MACROS_H_
