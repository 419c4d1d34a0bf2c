// ServiceMetrics: what the service's calls count for its metrics
// (metrics.h writes them out): the open streams by kind and the latencies
// of inserts, sample batches and MutatePriorities calls. Each event costs a
// clock read and a few relaxed atomic adds, no lock. Calls of clients that
// use a table in the server's process directly (cc/core/local_table.h) do
// not pass the service and are not counted here (their tables count them).
//
// Thread-safe.
#ifndef REVERB_CC_SERVICE_SERVICE_METRICS_H_
#define REVERB_CC_SERVICE_SERVICE_METRICS_H_

#include <atomic>
#include <cstdint>

#include "cc/support/latency_histogram.h"

namespace deepmind::reverb {

struct ServiceMetrics {
  // Counts itself in `*count` while it lives (a member of a stream
  // reactor, which is destroyed in its OnDone).
  class OpenStream {
   public:
    explicit OpenStream(std::atomic<int64_t>* count) : count_(count) {
      count_->fetch_add(1, std::memory_order_relaxed);
    }
    ~OpenStream() { count_->fetch_sub(1, std::memory_order_relaxed); }
    OpenStream(const OpenStream&) = delete;
    OpenStream& operator=(const OpenStream&) = delete;

   private:
    std::atomic<int64_t>* const count_;
  };

  std::atomic<int64_t> open_insert_streams{0};
  std::atomic<int64_t> open_sample_streams{0};
  // From an item's arrival in an InsertStream to its table's confirmation
  // (rate limiter waits included); items that fail are not counted.
  LatencyHistogram insert_latency;
  // From a sample stream's request of a table batch to the batch sampled
  // (rate limiter waits included).
  LatencyHistogram sample_latency;
  // A MutatePriorities call in its table.
  LatencyHistogram mutate_latency;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SERVICE_METRICS_H_
