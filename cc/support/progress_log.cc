#include "cc/support/progress_log.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cc/support/log.h"

namespace deepmind::reverb {
namespace {

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

absl::Duration ProgressIntervalFromEnvironment() {
  const char* value = std::getenv("REVERB_PROGRESS_INTERVAL_MS");
  int64_t ms = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &ms) || ms < 0) {
    return kDefaultProgressInterval;
  }
  return absl::Milliseconds(ms);
}

ProgressLog::ProgressLog(std::string what, uint64_t total_bytes,
                         absl::Duration interval, Clock clock)
    : what_(std::move(what)),
      total_(total_bytes),
      interval_(interval),
      clock_(std::move(clock)),
      start_(clock_()),
      next_line_(start_ + interval_) {}

void ProgressLog::Update(uint64_t done_bytes) {
  done_ = std::max(done_, done_bytes);
  const absl::Time now = clock_();
  if (now < next_line_) return;
  next_line_ = now + interval_;
  logged_ = true;
  const double seconds = absl::ToDoubleSeconds(now - start_);
  const double rate = seconds > 0 ? MiB(done_) / seconds : 0;
  std::string line = absl::StrFormat("%s: %.1f", what_, MiB(done_));
  if (total_ > 0) {
    absl::StrAppendFormat(&line, " of %.1f MiB (%d%%)", MiB(total_),
                          static_cast<int>(100 * done_ / total_));
  } else {
    absl::StrAppend(&line, " MiB");
  }
  absl::StrAppendFormat(&line, ", %.1f MiB/s", rate);
  if (total_ > 0 && rate > 0 && done_ < total_) {
    absl::StrAppendFormat(&line, ", about %.0f s left",
                          std::ceil(MiB(total_ - done_) / rate));
  }
  Log(LogSeverity::kInfo, line);
}

void ProgressLog::Done() {
  if (!logged_) return;
  const double seconds = absl::ToDoubleSeconds(clock_() - start_);
  Log(LogSeverity::kInfo,
      absl::StrFormat("%s: done, %.1f MiB in %.1f s (%.1f MiB/s)", what_,
                      MiB(done_), seconds,
                      seconds > 0 ? MiB(done_) / seconds : 0));
}

}  // namespace deepmind::reverb
