// RateLimiter: decides whether a table may insert or sample right now, from
// three counters (inserts, samples, deletes since construction or Reset) and
// four settings.
//
//   size   = inserts - deletes
//   cursor = inserts * samples_per_insert - samples
//
// A sample of n items is allowed iff size >= min_size_to_sample and
// cursor - n >= min_diff. An insert of n items is allowed iff the table
// would still be at most min_size_to_sample items large, or
// (inserts + n) * samples_per_insert - samples <= max_diff.
//
// The rate limiter never blocks; the table waits until a predicate holds.
// Not thread-safe: its table calls it under the table's mutex.
#ifndef REVERB_CC_RATE_LIMITERS_RATE_LIMITER_H_
#define REVERB_CC_RATE_LIMITERS_RATE_LIMITER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "cc/support/export.h"
#include "reverb/cc/checkpointing/checkpoint.pb.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT RateLimiter {
 public:
  // INVALID_ARGUMENT unless samples_per_insert > 0, min_size_to_sample >= 1
  // and min_diff <= max_diff (none of them NaN).
  static absl::StatusOr<RateLimiter> Create(double samples_per_insert,
                                            int64_t min_size_to_sample,
                                            double min_diff, double max_diff);

  // Settings and counters as saved by CheckpointState().
  static absl::StatusOr<RateLimiter> FromCheckpoint(
      const RateLimiterCheckpoint& checkpoint);

  bool CanSample(int64_t num_samples) const;
  bool CanInsert(int64_t num_inserts) const;

  // Counts one sample and returns true if CanSample(1); else returns false.
  bool MaybeCommitSample();
  // Counts an item that entered the table (after any eviction it caused).
  void Insert() { ++inserts_; }
  // Counts an item that left the table, for whatever reason.
  void Delete() { ++deletes_; }
  // Zeroes the counters; the settings stay.
  void Reset();

  double samples_per_insert() const { return samples_per_insert_; }
  int64_t min_size_to_sample() const { return min_size_to_sample_; }
  double min_diff() const { return min_diff_; }
  double max_diff() const { return max_diff_; }
  int64_t inserts() const { return inserts_; }
  int64_t samples() const { return samples_; }
  int64_t deletes() const { return deletes_; }
  // inserts * samples_per_insert - samples (see above).
  double cursor() const { return inserts_ * samples_per_insert_ - samples_; }

  RateLimiterInfo Info() const;
  RateLimiterCheckpoint CheckpointState() const;
  std::string DebugString() const;

 private:
  RateLimiter(double samples_per_insert, int64_t min_size_to_sample,
              double min_diff, double max_diff);

  double samples_per_insert_;
  int64_t min_size_to_sample_;
  double min_diff_;
  double max_diff_;
  int64_t inserts_ = 0;
  int64_t samples_ = 0;
  int64_t deletes_ = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_RATE_LIMITERS_RATE_LIMITER_H_
