// LatencyHistogram: durations counted into fixed buckets (100 us to 10 s),
// as a Prometheus histogram shows them. Observe is a few relaxed atomic adds
// and takes no lock, for hot paths; Read sees each counter at some moment,
// so a snapshot taken while Observe runs may miss that observation (or see
// it in its bucket and not yet in the sum). The count is the sum of the
// buckets, so a snapshot's buckets always add up to it.
//
// Thread-safe.
#ifndef REVERB_CC_SUPPORT_LATENCY_HISTOGRAM_H_
#define REVERB_CC_SUPPORT_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT LatencyHistogram {
 public:
  // Upper bounds (seconds, inclusive) of the buckets but the last (+Inf).
  static constexpr std::array<double, 16> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};
  static constexpr int kNumBuckets = kBounds.size() + 1;

  struct Snapshot {
    // Observations per bucket (not cumulative); the last is beyond 10 s.
    std::array<int64_t, kNumBuckets> buckets{};
    int64_t count = 0;
    double sum_seconds = 0;
  };

  // Counts `duration` (negative counts as 0).
  void Observe(absl::Duration duration);
  Snapshot Read() const;

 private:
  std::array<std::atomic<int64_t>, kNumBuckets> buckets_{};
  std::atomic<int64_t> sum_nanos_{0};
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_LATENCY_HISTOGRAM_H_
