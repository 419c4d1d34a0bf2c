#include "cc/support/mutex.h"

#include <thread>

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
