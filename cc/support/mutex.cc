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

// How often Lock tries again before it sleeps (a few microseconds).
constexpr int kLockSpins = 100;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void Mutex::WakeAwaiters() {
  // A woken waiter that has not run yet wakes the next one itself.
  for (const Waiter* waiter : waiters_) {
    if (waiter->woken) return;
  }
  for (Waiter* waiter : waiters_) {
    if (waiter->condition->Eval()) {
      waiter->woken = true;
      // Under mu_: the waiter cannot return (and free its cv) before we let
      // go of the mutex.
      waiter->cv.notify_one();
      return;
    }
  }
}

void Mutex::LockSlow() {
  for (int spin = 0; spin < kLockSpins; ++spin) {
    CpuRelax();
    if (mu_.try_lock()) return;
  }
  mu_.lock();
}

void Mutex::Unlock() {
  WakeAwaiters();
  mu_.unlock();
}

bool Mutex::AwaitWithDeadline(const absl::Condition& condition,
                              absl::Time deadline) {
  if (condition.Eval()) return true;
  // Releasing the mutex here is a release like Unlock's.
  WakeAwaiters();
  Waiter self{&condition};
  waiters_.push_back(&self);
  std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
  bool holds = false;
  while (!(holds = condition.Eval())) {
    if (self.woken) {
      // Woken, but another thread got here first: pass the wake-up on.
      self.woken = false;
      WakeAwaiters();
    }
    if (!WaitUntil(self.cv, lock, deadline)) break;
  }
  waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &self));
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
