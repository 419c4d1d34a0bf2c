#include "cc/checkpointing/save_progress.h"

#include "absl/time/clock.h"

namespace deepmind::reverb {

constexpr auto kRelaxed = std::memory_order_relaxed;

void SaveProgress::Begin() {
  done_.store(0, kRelaxed);
  total_.store(0, kRelaxed);
  started_nanos_.store(absl::GetCurrentTimeNanos(), kRelaxed);
  saving_.store(true, kRelaxed);
}

void SaveProgress::SetTotal(int64_t bytes) { total_.store(bytes, kRelaxed); }

void SaveProgress::Add(int64_t bytes) { done_.fetch_add(bytes, kRelaxed); }

void SaveProgress::End(bool ok, int64_t file_bytes) {
  const int64_t nanos =
      absl::GetCurrentTimeNanos() - started_nanos_.load(kRelaxed);
  if (ok) {
    last_nanos_.store(nanos, kRelaxed);
    last_bytes_.store(file_bytes, kRelaxed);
  } else {
    failures_.fetch_add(1, kRelaxed);
  }
  saves_.fetch_add(1, kRelaxed);
  saving_.store(false, kRelaxed);
}

SaveProgress::Snapshot SaveProgress::Read() const {
  Snapshot snapshot;
  snapshot.saving = saving_.load(kRelaxed);
  snapshot.bytes_done = done_.load(kRelaxed);
  snapshot.bytes_total = total_.load(kRelaxed);
  if (snapshot.saving) {
    snapshot.elapsed = absl::Nanoseconds(absl::GetCurrentTimeNanos() -
                                         started_nanos_.load(kRelaxed));
  }
  snapshot.saves = saves_.load(kRelaxed);
  snapshot.failures = failures_.load(kRelaxed);
  snapshot.last_duration = absl::Nanoseconds(last_nanos_.load(kRelaxed));
  snapshot.last_bytes = last_bytes_.load(kRelaxed);
  return snapshot;
}

}  // namespace deepmind::reverb
