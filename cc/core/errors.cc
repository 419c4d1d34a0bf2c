#include "cc/core/errors.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace deepmind::reverb {
namespace {

constexpr char kRateLimiterTimeoutMessage[] =
    "Rate Limiter: Timeout exceeded before the right to insert was acquired.";

}  // namespace

absl::Status RateLimiterTimeout() {
  return absl::DeadlineExceededError(kRateLimiterTimeoutMessage);
}

bool IsRateLimiterTimeout(const absl::Status& status) {
  return absl::IsDeadlineExceeded(status) &&
         absl::StrContains(status.message(), kRateLimiterTimeoutMessage);
}

absl::Status TableClosed() {
  return absl::CancelledError("RateLimiter has been cancelled");
}

absl::Status WriterTimeout(int64_t waiting, int64_t awaiting) {
  return absl::DeadlineExceededError(absl::StrCat(
      "Timeout exceeded with ", waiting, " items waiting to be written and ",
      awaiting, " items awaiting confirmation."));
}

absl::Status TableNotFound(absl::string_view name) {
  return absl::NotFoundError(
      absl::StrCat("Priority table ", name, " was not found"));
}

}  // namespace deepmind::reverb
