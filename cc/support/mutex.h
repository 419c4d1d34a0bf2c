// Mutex, MutexLock, CondVar and Notification: the part of abseil's
// synchronization interface libreverb uses, over the standard library's
// primitives (a futex each on Linux), with Clang's thread-safety annotations.
//
// Why not absl::Mutex: Debian builds abseil without NDEBUG, so its Mutex
// keeps a process-wide graph of lock orders and updates it on every Lock (a
// global spin lock and a hash lookup each time), which costs lock-heavy paths
// much of their CPU (a writer's throughput nearly halves). The only way to
// turn that off is a process-wide setting
// (absl::SetMutexDeadlockDetectionMode), which a library must not change
// behind its host's back. Our lock orders are fixed by design and documented
// where the locks are declared.
//
// Semantics follow abseil's: a thread releasing the mutex evaluates the
// conditions of the threads in Await and wakes one whose condition holds,
// the longest waiting (the mutex admits one at a time anyway); that one, when
// it lets go in turn, wakes the next (waking every thread whose condition
// holds would wake all the idle workers of a pool for each task). CondVar
// waits return true on timeout (WaitWithTimeout/WaitWithDeadline) and may
// wake spuriously.
#ifndef REVERB_CC_SUPPORT_MUTEX_H_
#define REVERB_CC_SUPPORT_MUTEX_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"  // absl::Condition only.
#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class CondVar;

class ABSL_LOCKABLE REVERB_EXPORT Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    if (!mu_.try_lock()) LockSlow();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION();

  // Releases the mutex until `condition` holds, then returns with the mutex
  // held. The condition is evaluated with the mutex held.
  void Await(const absl::Condition& condition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithDeadline(condition, absl::InfiniteFuture());
  }
  // As Await, giving up after `timeout` / at `deadline`. Returns whether the
  // condition holds (the mutex is held either way).
  bool AwaitWithTimeout(const absl::Condition& condition,
                        absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(condition, absl::Now() + timeout);
  }
  bool AwaitWithDeadline(const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this);

 private:
  friend class CondVar;

  // A thread in Await: its condition, and what wakes it.
  struct Waiter {
    const absl::Condition* condition;
    std::condition_variable cv;
    bool woken = false;
  };

  // Called with mu_ held by a thread about to release it: unless a woken
  // waiter has yet to run, evaluates the conditions of the threads in Await
  // on their behalf, as abseil does, and wakes the first whose condition now
  // holds (and only it: a writer's worker waiting for work is not woken by
  // every Append, nor every idle worker of a pool by each task).
  void WakeAwaiters();

  // Spins a little before sleeping, as abseil's Mutex does: our critical
  // sections are short, and sleeping on a futex costs two context switches.
  void LockSlow();

  std::mutex mu_;
  std::vector<Waiter*> waiters_;  // Guarded by mu_.
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

class REVERB_EXPORT CondVar {
 public:
  // Releases `mu` (held) until signalled, then reacquires it.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    WaitWithDeadline(mu, absl::InfiniteFuture());
  }
  // As Wait, up to `timeout` / `deadline`. True if it timed out.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitWithDeadline(mu, absl::Now() + timeout);
  }
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A one-shot event: Notify once, wait any number of times.
class REVERB_EXPORT Notification {
 public:
  void Notify();
  bool HasBeenNotified() const {
    return notified_.load(std::memory_order_acquire);
  }
  void WaitForNotification() const {
    WaitForNotificationWithDeadline(absl::InfiniteFuture());
  }
  // Whether it was notified within `timeout` / by `deadline`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    return WaitForNotificationWithDeadline(absl::Now() + timeout);
  }
  bool WaitForNotificationWithDeadline(absl::Time deadline) const;

 private:
  mutable Mutex mu_;
  std::atomic<bool> notified_{false};
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_MUTEX_H_
