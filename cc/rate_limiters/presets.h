// The rate limiters users configure by name, as in dm-reverb's
// reverb/rate_limiters.py. Each returns INVALID_ARGUMENT with the message
// the Python layer shows as a ValueError.
#ifndef REVERB_CC_RATE_LIMITERS_PRESETS_H_
#define REVERB_CC_RATE_LIMITERS_PRESETS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "cc/rate_limiters/rate_limiter.h"

namespace deepmind::reverb {

// Blocks samples until the table holds `min_size_to_sample` items; never
// blocks inserts.
REVERB_EXPORT absl::StatusOr<RateLimiter> MinSizeRateLimiter(
    int64_t min_size_to_sample);

// Keeps inserts * samples_per_insert - samples within [min_diff, max_diff]
// once the table holds `min_size_to_sample` items. Requires
// samples_per_insert > 0, max_diff - min_diff >= 2 * max(1, spi),
// min_diff <= spi * min_size_to_sample and min_size_to_sample >= 1.
REVERB_EXPORT absl::StatusOr<RateLimiter> SampleToInsertRatioRateLimiter(
    double samples_per_insert, int64_t min_size_to_sample, double min_diff,
    double max_diff);

// True when a SampleToInsertRatio limiter cannot reach min_size_to_sample
// unless samples happen concurrently with inserts (max_diff < spi * min_size).
REVERB_EXPORT bool MayDeadlockWithoutConcurrentSampling(
    const RateLimiter& limiter);

// FIFO queue of at most `size` unsampled items (use with max_times_sampled=1).
// As in dm-reverb, any size >= 0 is accepted (0 still lets one item in: a
// table at most min_size_to_sample = 1 large always takes inserts); a
// negative size fails RateLimiter::Create (min_diff 0 > max_diff).
REVERB_EXPORT absl::StatusOr<RateLimiter> QueueRateLimiter(int64_t size);

// Same numbers as the queue; used with Lifo selectors for a stack.
REVERB_EXPORT absl::StatusOr<RateLimiter> StackRateLimiter(int64_t size);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_RATE_LIMITERS_PRESETS_H_
