#include "cc/rate_limiters/presets.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

absl::StatusOr<RateLimiter> MinSizeRateLimiter(int64_t min_size_to_sample) {
  if (min_size_to_sample < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_size_to_sample (", min_size_to_sample,
                     ") must be a positive integer"));
  }
  return RateLimiter::Create(1.0, min_size_to_sample,
                             std::numeric_limits<double>::lowest(),
                             std::numeric_limits<double>::max());
}

// The checks, their order and their texts are dm-reverb's.
absl::StatusOr<RateLimiter> SampleToInsertRatioRateLimiter(
    double samples_per_insert, int64_t min_size_to_sample, double min_diff,
    double max_diff) {
  if (!(samples_per_insert > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "samples_per_insert (", samples_per_insert, ") must be > 0"));
  }
  if (!(max_diff - min_diff >= 2 * std::max(1.0, samples_per_insert))) {
    return absl::InvalidArgumentError(
        "The size of error_buffer must be >= max(1.0, samples_per_insert) as "
        "smaller values could completely block samples and/or insert calls.");
  }
  if (min_diff > samples_per_insert * min_size_to_sample) {
    return absl::InvalidArgumentError(
        "The range covered by error_buffer is above "
        "samples_per_insert * min_size_to_sample. This will result in a "
        "deadlock as soon as min_size_to_sample items have been inserted.");
  }
  if (min_size_to_sample < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_size_to_sample (", min_size_to_sample,
                     ") must be a positive integer"));
  }
  return RateLimiter::Create(samples_per_insert, min_size_to_sample, min_diff,
                             max_diff);
}

bool MayDeadlockWithoutConcurrentSampling(const RateLimiter& limiter) {
  return limiter.max_diff() <
         limiter.samples_per_insert() * limiter.min_size_to_sample();
}

absl::StatusOr<RateLimiter> QueueRateLimiter(int64_t size) {
  return RateLimiter::Create(1.0, 1, 0.0, static_cast<double>(size));
}

absl::StatusOr<RateLimiter> StackRateLimiter(int64_t size) {
  return QueueRateLimiter(size);
}

}  // namespace deepmind::reverb
