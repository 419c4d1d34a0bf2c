// Statuses whose exact text clients match on, as dm-reverb's errors.h.
#ifndef REVERB_CC_CORE_ERRORS_H_
#define REVERB_CC_CORE_ERRORS_H_

#include "absl/status/status.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

// DEADLINE_EXCEEDED: a table could not insert or sample before the caller's
// deadline because its rate limiter did not allow it.
REVERB_EXPORT absl::Status RateLimiterTimeout();

// True for statuses made by RateLimiterTimeout() (matches code and text).
REVERB_EXPORT bool IsRateLimiterTimeout(const absl::Status& status);

// CANCELLED: the table was closed while the request waited, or before it
// was made.
REVERB_EXPORT absl::Status TableClosed();

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_ERRORS_H_
