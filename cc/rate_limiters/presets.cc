#include "cc/rate_limiters/presets.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

absl::StatusOr<RateLimiter> MinSizeRateLimiter(int64_t min_size_to_sample) {
  if (min_size_to_sample < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_size_to_sample must be a positive integer, got ",
        min_size_to_sample, "."));
  }
  return RateLimiter::Create(1.0, min_size_to_sample,
                             std::numeric_limits<double>::lowest(),
                             std::numeric_limits<double>::max());
}

absl::StatusOr<RateLimiter> SampleToInsertRatioRateLimiter(
    double samples_per_insert, int64_t min_size_to_sample, double min_diff,
    double max_diff) {
  if (!(samples_per_insert > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "samples_per_insert (", samples_per_insert, ") must be > 0."));
  }
  if (!(max_diff - min_diff >= 2 * std::max(1.0, samples_per_insert))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "The size of the error buffer must be >= 2 * max(1.0, "
        "samples_per_insert) (",
        2 * std::max(1.0, samples_per_insert), ") but got ",
        max_diff - min_diff, " (min_diff=", min_diff, ", max_diff=", max_diff,
        ")."));
  }
  if (min_diff > samples_per_insert * min_size_to_sample) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_diff (", min_diff,
        ") must be <= samples_per_insert * min_size_to_sample (",
        samples_per_insert * min_size_to_sample,
        "), otherwise sampling could never begin."));
  }
  if (min_size_to_sample < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_size_to_sample must be a positive integer, got ",
        min_size_to_sample, "."));
  }
  return RateLimiter::Create(samples_per_insert, min_size_to_sample, min_diff,
                             max_diff);
}

bool MayDeadlockWithoutConcurrentSampling(const RateLimiter& limiter) {
  return limiter.max_diff() <
         limiter.samples_per_insert() * limiter.min_size_to_sample();
}

absl::StatusOr<RateLimiter> QueueRateLimiter(int64_t size) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("size must be a positive integer, got ", size, "."));
  }
  return RateLimiter::Create(1.0, 1, 0.0, static_cast<double>(size));
}

absl::StatusOr<RateLimiter> StackRateLimiter(int64_t size) {
  return QueueRateLimiter(size);
}

}  // namespace deepmind::reverb
