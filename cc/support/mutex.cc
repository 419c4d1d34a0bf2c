#include "cc/support/mutex.h"

#include <algorithm>

namespace deepmind::reverb {
namespace {

// Waits on `cv` (releasing `lock`) until woken or `deadline`. False when the
// deadline has passed without a wake-up. Long waits are cut into a day at a
// time (the caller re-checks and waits again) so that the clock arithmetic
// cannot overflow.
bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
               absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    cv.wait(lock);
    return true;
  }
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return false;
  const auto waited = cv.wait_for(
      lock, absl::ToChronoNanoseconds(std::min(left, absl::Hours(24))));
  return waited == std::cv_status::no_timeout || absl::Now() < deadline;
}

}  // namespace

void Mutex::Unlock() {
  WakeAwaiters();
  mu_.unlock();
}

bool Mutex::AwaitWithDeadline(const absl::Condition& condition,
                              absl::Time deadline) {
  if (condition.Eval()) return true;
  // Releasing the mutex here is a release like Unlock: the others in Await
  // re-evaluate (once; waking again after a wake-up changed nothing).
  WakeAwaiters();
  std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
  ++awaiting_;
  bool holds = false;
  while (!(holds = condition.Eval()) && WaitUntil(released_, lock, deadline)) {
  }
  --awaiting_;
  lock.release();
  return holds;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  mu->WakeAwaiters();
  std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
  const bool woken = WaitUntil(cv_, lock, deadline);
  lock.release();
  return !woken;
}

void Notification::Notify() {
  MutexLock lock(&mu_);
  notified_.store(true, std::memory_order_release);
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  if (HasBeenNotified()) return true;
  const auto notified = [this] { return HasBeenNotified(); };
  MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&notified), deadline);
}

}  // namespace deepmind::reverb
