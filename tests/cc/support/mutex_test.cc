#include "cc/support/mutex.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

constexpr absl::Duration kLong = absl::Seconds(30);  // Only to avoid hangs.

TEST(MutexTest, AwaitReturnsOnceAnotherThreadMakesTheConditionTrue) {
  Mutex mu;
  bool ready = false;
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(10));
    MutexLock lock(&mu);
    ready = true;
  });
  MutexLock lock(&mu);
  EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&ready), kLong));
  EXPECT_TRUE(ready);
  mu.Unlock();
  setter.join();
  mu.Lock();
}

TEST(MutexTest, AwaitWithTimeoutGivesUpWithTheMutexHeld) {
  Mutex mu;
  bool never = false;
  MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(
      mu.AwaitWithTimeout(absl::Condition(&never), absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  never = true;  // Still held: no data race for TSan to report.
}

// A thread that changes the state and then awaits releases the mutex inside
// Await: the others awaiting must see that change.
TEST(MutexTest, ReleasingInsideAwaitWakesTheOtherAwaiters) {
  Mutex mu;
  bool first = false;
  bool second = false;
  std::thread waiter([&] {
    MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&first), kLong));
    second = true;
  });
  absl::SleepFor(absl::Milliseconds(10));  // Let the waiter block first.
  MutexLock lock(&mu);
  first = true;
  EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&second), kLong));
  mu.Unlock();
  waiter.join();
  mu.Lock();
}

// Threads awaiting the same condition, as a pool's idle workers await a
// task: a release wakes one of them, not all; the one woken wakes the next
// when it lets go, so every waiter whose condition holds gets its turn.
TEST(MutexTest, AReleaseWakesOneAwaiterWhichWakesTheNext) {
  constexpr int kThreads = 4;
  Mutex mu;
  int tasks = 0;
  int done = 0;
  int waiting = 0;
  bool stop = false;
  // How often each thread evaluated its condition itself: on entering
  // Await, and after each wake-up (the releasing thread evaluates it on its
  // behalf otherwise).
  std::vector<int> own_evaluations(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::thread::id me = std::this_thread::get_id();
      const auto ready = [&] {
        if (std::this_thread::get_id() == me) ++own_evaluations[t];
        return tasks > 0 || stop;
      };
      MutexLock lock(&mu);
      ++waiting;
      while (true) {
        ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&ready), kLong));
        if (tasks == 0) break;  // Stopped.
        --tasks;
        ++done;
      }
    });
  }
  const auto all_waiting = [&] { return waiting == kThreads; };
  const auto one_done = [&] { return done == 1; };
  const auto four_done = [&] { return done == 4; };
  {
    MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_waiting), kLong));
  }
  absl::SleepFor(absl::Milliseconds(50));  // All in Await.
  {
    MutexLock lock(&mu);
    std::fill(own_evaluations.begin(), own_evaluations.end(), 0);
    tasks = 1;
  }
  {
    MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&one_done), kLong));
  }
  absl::SleepFor(absl::Milliseconds(100));  // Time for needless wake-ups.
  {
    MutexLock lock(&mu);
    // The one woken: after its wake-up and back into Await. No other.
    EXPECT_EQ(std::count(own_evaluations.begin(), own_evaluations.end(), 0),
              kThreads - 1);
    tasks = 3;  // Three turns, one after the other.
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&four_done), kLong));
    stop = true;  // Every thread, one after the other.
  }
  for (auto& thread : threads) thread.join();
  MutexLock lock(&mu);
  EXPECT_EQ(done, 4);
}

TEST(MutexTest, ManyThreadsCountUnderTheLock) {
  Mutex mu;
  int count = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++count;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  MutexLock lock(&mu);
  EXPECT_EQ(count, 40000);
}

TEST(CondVarTest, WaitReturnsFalseWhenSignalledAndTrueOnTimeout) {
  Mutex mu;
  CondVar cv;
  bool signalled = false;
  std::thread signaller([&] {
    absl::SleepFor(absl::Milliseconds(10));
    MutexLock lock(&mu);
    signalled = true;
    cv.Signal();
  });
  {
    MutexLock lock(&mu);
    while (!signalled) EXPECT_FALSE(cv.WaitWithTimeout(&mu, kLong));
  }
  signaller.join();
  MutexLock lock(&mu);
  EXPECT_TRUE(cv.WaitWithTimeout(&mu, absl::Milliseconds(20)));
  EXPECT_TRUE(cv.WaitWithDeadline(&mu, absl::Now() - absl::Seconds(1)));
}

TEST(NotificationTest, WaitersSeeTheNotificationAndTimeOutWithout) {
  Notification notification;
  EXPECT_FALSE(notification.HasBeenNotified());
  EXPECT_FALSE(
      notification.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  std::thread notifier([&] {
    absl::SleepFor(absl::Milliseconds(10));
    notification.Notify();
  });
  EXPECT_TRUE(notification.WaitForNotificationWithTimeout(kLong));
  EXPECT_TRUE(notification.HasBeenNotified());
  notifier.join();
  notification.WaitForNotification();  // Returns at once.
}

}  // namespace
}  // namespace deepmind::reverb
