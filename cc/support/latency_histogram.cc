#include "cc/support/latency_histogram.h"

#include <algorithm>

namespace deepmind::reverb {

void LatencyHistogram::Observe(absl::Duration duration) {
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(duration));
  const int bucket = static_cast<int>(
      std::lower_bound(kBounds.begin(), kBounds.end(), seconds) -
      kBounds.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(static_cast<int64_t>(seconds * 1e9),
                       std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::Read() const {
  Snapshot snapshot;
  for (int i = 0; i < kNumBuckets; ++i) {
    snapshot.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    snapshot.count += snapshot.buckets[i];
  }
  snapshot.sum_seconds =
      static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) / 1e9;
  return snapshot;
}

}  // namespace deepmind::reverb
