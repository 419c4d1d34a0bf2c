#include "cc/support/byte_budget.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

TEST(ByteBudgetTest, AddWithinBothLimitsIsCountedTwice) {
  ByteBudget budget(100, "total");
  ByteBudget::Account a(&budget, 60, "per holder");
  ByteBudget::Account b(&budget, 60, "per holder");
  EXPECT_TRUE(a.Add(40).ok());
  EXPECT_TRUE(b.Add(50).ok());
  EXPECT_EQ(a.held(), 40);
  EXPECT_EQ(b.held(), 50);
  EXPECT_EQ(budget.held(), 90);
}

TEST(ByteBudgetTest, PassingTheAccountLimitTakesNothingAndNamesIt) {
  ByteBudget budget(1000, "total");
  ByteBudget::Account account(&budget, 60, "per holder");
  ASSERT_TRUE(account.Add(50).ok());
  const absl::Status status = account.Add(11);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_TRUE(Contains(status, "per holder (60 bytes)")) << status;
  EXPECT_TRUE(Contains(status, "50 bytes held, 11 more")) << status;
  EXPECT_EQ(account.held(), 50);
  EXPECT_EQ(budget.held(), 50);
  EXPECT_TRUE(account.Add(10).ok());  // Exactly at the limit is fine.
  EXPECT_EQ(account.held(), 60);
}

TEST(ByteBudgetTest, PassingTheTotalLimitTakesNothingAndNamesIt) {
  ByteBudget budget(100, "total");
  ByteBudget::Account a(&budget, 80, "per holder");
  ByteBudget::Account b(&budget, 80, "per holder");
  ASSERT_TRUE(a.Add(70).ok());
  const absl::Status status = b.Add(40);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_TRUE(Contains(status, "total (100 bytes)")) << status;
  EXPECT_TRUE(Contains(status, "70 bytes held, 40 more")) << status;
  EXPECT_EQ(b.held(), 0);
  EXPECT_EQ(budget.held(), 70);
  EXPECT_TRUE(b.Add(30).ok());
}

TEST(ByteBudgetTest, ReleasedBytesCanBeTakenAgain) {
  ByteBudget budget(100, "total");
  ByteBudget::Account a(&budget, 0, "per holder");
  ByteBudget::Account b(&budget, 0, "per holder");
  ASSERT_TRUE(a.Add(100).ok());
  EXPECT_FALSE(b.Add(1).ok());
  a.Release(30);
  EXPECT_EQ(a.held(), 70);
  EXPECT_TRUE(b.Add(30).ok());
  a.ReleaseAll();
  EXPECT_EQ(a.held(), 0);
  EXPECT_EQ(budget.held(), 30);
}

TEST(ByteBudgetTest, DestroyedAccountGivesEverythingBack) {
  ByteBudget budget(100, "total");
  {
    ByteBudget::Account account(&budget, 100, "per holder");
    ASSERT_TRUE(account.Add(99).ok());
    EXPECT_EQ(budget.held(), 99);
  }
  EXPECT_EQ(budget.held(), 0);
}

TEST(ByteBudgetTest, NonPositiveLimitsMeanNoLimit) {
  ByteBudget budget(0, "total");
  ByteBudget::Account account(&budget, -1, "per holder");
  EXPECT_TRUE(account.Add(int64_t{1} << 40).ok());
  EXPECT_TRUE(account.Add(int64_t{1} << 40).ok());
  EXPECT_EQ(budget.held(), int64_t{2} << 40);
}

// Many accounts on many threads race for the total: it is never passed, and
// every byte taken is accounted for.
TEST(ByteBudgetTest, ConcurrentAccountsNeverPassTheTotal) {
  constexpr int kThreads = 8;
  constexpr int kAttempts = 20000;
  constexpr int64_t kLimit = 1000;
  ByteBudget budget(kLimit, "total");
  std::atomic<int64_t> max_seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      ByteBudget::Account account(&budget, 0, "per holder");
      for (int i = 0; i < kAttempts; ++i) {
        if (account.Add(7).ok()) {
          int64_t seen = budget.held();
          int64_t max = max_seen.load();
          while (seen > max && !max_seen.compare_exchange_weak(max, seen)) {
          }
        }
        if (i % 3 == 0) account.ReleaseAll();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_LE(max_seen.load(), kLimit);
  EXPECT_GT(max_seen.load(), 0);
  EXPECT_EQ(budget.held(), 0);  // Every account has given back its bytes.
}

}  // namespace
}  // namespace deepmind::reverb
