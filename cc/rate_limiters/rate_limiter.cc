#include "cc/rate_limiters/rate_limiter.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

RateLimiter::RateLimiter(double samples_per_insert, int64_t min_size_to_sample,
                         double min_diff, double max_diff)
    : samples_per_insert_(samples_per_insert),
      min_size_to_sample_(min_size_to_sample),
      min_diff_(min_diff),
      max_diff_(max_diff) {}

absl::StatusOr<RateLimiter> RateLimiter::Create(double samples_per_insert,
                                                int64_t min_size_to_sample,
                                                double min_diff,
                                                double max_diff) {
  if (!(samples_per_insert > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "samples_per_insert must be > 0, got ", samples_per_insert, "."));
  }
  if (min_size_to_sample < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_size_to_sample must be >= 1, got ", min_size_to_sample, "."));
  }
  if (std::isnan(min_diff) || std::isnan(max_diff) || min_diff > max_diff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_diff (", min_diff, ") must be <= max_diff (", max_diff, ")."));
  }
  return RateLimiter(samples_per_insert, min_size_to_sample, min_diff,
                     max_diff);
}

absl::StatusOr<RateLimiter> RateLimiter::FromCheckpoint(
    const RateLimiterCheckpoint& checkpoint) {
  auto limiter =
      Create(checkpoint.samples_per_insert(), checkpoint.min_size_to_sample(),
             checkpoint.min_diff(), checkpoint.max_diff());
  if (!limiter.ok()) return limiter.status();
  limiter->inserts_ = checkpoint.insert_count();
  limiter->samples_ = checkpoint.sample_count();
  limiter->deletes_ = checkpoint.delete_count();
  return limiter;
}

bool RateLimiter::CanSample(int64_t num_samples) const {
  if (inserts_ - deletes_ < min_size_to_sample_) return false;
  return cursor() - num_samples >= min_diff_;
}

bool RateLimiter::CanInsert(int64_t num_inserts) const {
  if (inserts_ + num_inserts - deletes_ <= min_size_to_sample_) return true;
  return (inserts_ + num_inserts) * samples_per_insert_ - samples_ <= max_diff_;
}

bool RateLimiter::MaybeCommitSample() {
  if (!CanSample(1)) return false;
  ++samples_;
  return true;
}

void RateLimiter::Reset() {
  inserts_ = 0;
  samples_ = 0;
  deletes_ = 0;
}

RateLimiterInfo RateLimiter::Info() const {
  RateLimiterInfo info;
  info.set_samples_per_insert(samples_per_insert_);
  info.set_min_diff(min_diff_);
  info.set_max_diff(max_diff_);
  info.set_min_size_to_sample(min_size_to_sample_);
  info.mutable_insert_stats()->set_completed(inserts_);
  info.mutable_sample_stats()->set_completed(samples_);
  return info;
}

RateLimiterCheckpoint RateLimiter::CheckpointState() const {
  RateLimiterCheckpoint checkpoint;
  checkpoint.set_samples_per_insert(samples_per_insert_);
  checkpoint.set_min_diff(min_diff_);
  checkpoint.set_max_diff(max_diff_);
  checkpoint.set_min_size_to_sample(min_size_to_sample_);
  checkpoint.set_insert_count(inserts_);
  checkpoint.set_sample_count(samples_);
  checkpoint.set_delete_count(deletes_);
  return checkpoint;
}

// "min_diff_" is dm-reverb's spelling.
std::string RateLimiter::DebugString() const {
  return absl::StrCat("RateLimiter(samples_per_insert=", samples_per_insert_,
                      ", min_diff_=", min_diff_, ", max_diff=", max_diff_,
                      ", min_size_to_sample=", min_size_to_sample_, ")");
}

}  // namespace deepmind::reverb
