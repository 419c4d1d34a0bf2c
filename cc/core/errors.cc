#include "cc/core/errors.h"

#include "absl/strings/match.h"

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

}  // namespace deepmind::reverb
