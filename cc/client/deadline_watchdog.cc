#include "cc/client/deadline_watchdog.h"

#include <algorithm>
#include <thread>

#include "cc/support/thread_name.h"

namespace deepmind::reverb {

DeadlineWatchdog& DeadlineWatchdog::Get() {
  static DeadlineWatchdog* const watchdog = new DeadlineWatchdog();
  return *watchdog;
}

DeadlineWatchdog::DeadlineWatchdog() {
  std::thread thread([this] { Run(); });
  SetThreadName(thread, "reverb-deadline");
  thread.detach();
}

int64_t DeadlineWatchdog::Arm(grpc::ClientContext* context,
                              absl::Time deadline) {
  MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  armed_.emplace(id, Armed{context, deadline});
  if (deadline < sleeping_until_) wake_.Signal();
  return id;
}

bool DeadlineWatchdog::Disarm(int64_t id) {
  MutexLock lock(&mu_);
  auto it = armed_.find(id);
  const bool fired = it->second.fired;
  armed_.erase(it);
  return fired;
}

void DeadlineWatchdog::Run() {
  MutexLock lock(&mu_);
  while (true) {
    const absl::Time now = absl::Now();
    absl::Time earliest = absl::InfiniteFuture();
    for (auto& [id, armed] : armed_) {
      if (armed.fired) continue;
      if (armed.deadline <= now) {
        // Under mu_, so that Disarm cannot return (and the context go away)
        // meanwhile; TryCancel does not block.
        armed.context->TryCancel();
        armed.fired = true;
      } else {
        earliest = std::min(earliest, armed.deadline);
      }
    }
    sleeping_until_ = earliest;
    wake_.WaitWithDeadline(&mu_, earliest);
  }
}

}  // namespace deepmind::reverb
