// ProgressLog: progress of long work (checkpoint saves and loads) as INFO
// lines through Log (log.h), at most one per interval:
//   "<what>: 120.0 of 400.0 MiB (30%), 95.3 MiB/s, about 3 s left"
// and, if it logged any, a last one at Done():
//   "<what>: done, 400.0 MiB in 4.2 s (95.2 MiB/s)".
// Work that ends within its first interval logs nothing.
//
// The interval is REVERB_PROGRESS_INTERVAL_MS (default 5 s; 0 logs every
// step, for tests). Not thread-safe: one per piece of work, on its thread.
#ifndef REVERB_CC_SUPPORT_PROGRESS_LOG_H_
#define REVERB_CC_SUPPORT_PROGRESS_LOG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

inline constexpr absl::Duration kDefaultProgressInterval = absl::Seconds(5);

// REVERB_PROGRESS_INTERVAL_MS, or kDefaultProgressInterval when it is unset
// or not a non-negative integer.
REVERB_EXPORT absl::Duration ProgressIntervalFromEnvironment();

class REVERB_EXPORT ProgressLog {
 public:
  using Clock = std::function<absl::Time()>;

  // `total_bytes` may be 0 (then no percentage and no time left).
  ProgressLog(std::string what, uint64_t total_bytes,
              absl::Duration interval = ProgressIntervalFromEnvironment(),
              Clock clock = absl::Now);

  // `done_bytes` of the total are done (never decreasing).
  void Update(uint64_t done_bytes);
  // `bytes` more are done.
  void Add(uint64_t bytes) { Update(done_ + bytes); }
  // The work is complete (see above).
  void Done();

 private:
  const std::string what_;
  const uint64_t total_;
  const absl::Duration interval_;
  const Clock clock_;
  const absl::Time start_;
  absl::Time next_line_;
  uint64_t done_ = 0;
  bool logged_ = false;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_PROGRESS_LOG_H_
