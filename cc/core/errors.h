// Statuses whose exact text clients match on, as dm-reverb's errors.h.
#ifndef REVERB_CC_CORE_ERRORS_H_
#define REVERB_CC_CORE_ERRORS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
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

// NOT_FOUND "Priority table <name> was not found": no table of that name.
REVERB_EXPORT absl::Status TableNotFound(absl::string_view name);

// DEADLINE_EXCEEDED "Timeout exceeded with <waiting> items waiting to be
// written and <awaiting> items awaiting confirmation.": a writer's Flush
// (or EndEpisode, Close) timed out. Python's reverb.errors.writer_call_timeout
// turns it into DeadlineExceededError by its "Timeout exceeded".
REVERB_EXPORT absl::Status WriterTimeout(int64_t waiting, int64_t awaiting);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_ERRORS_H_
