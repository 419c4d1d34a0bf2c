#include "cc/rate_limiters/rate_limiter.h"

#include <limits>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

RateLimiter Make(double spi, int64_t min_size, double min_diff,
                 double max_diff) {
  auto limiter = RateLimiter::Create(spi, min_size, min_diff, max_diff);
  EXPECT_TRUE(limiter.ok()) << limiter.status();
  return *limiter;
}

void Insert(RateLimiter* limiter, int n) {
  for (int i = 0; i < n; ++i) limiter->Insert();
}

TEST(RateLimiterTest, RejectsInvalidSettings) {
  EXPECT_FALSE(RateLimiter::Create(0, 1, 0, 1).ok());
  EXPECT_FALSE(RateLimiter::Create(-1, 1, 0, 1).ok());
  EXPECT_FALSE(RateLimiter::Create(1, 0, 0, 1).ok());
  EXPECT_FALSE(RateLimiter::Create(1, 1, 2, 1).ok());
  EXPECT_FALSE(RateLimiter::Create(1, 1, std::nan(""), 1).ok());
  EXPECT_EQ(RateLimiter::Create(1, 0, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Rows: settings, counters, then the expected predicates (spec 4.2).
struct Case {
  double spi;
  int64_t min_size;
  double min_diff, max_diff;
  int inserts, samples, deletes;
  int64_t n;
  bool can_sample, can_insert;
};

TEST(RateLimiterTest, PredicatesMatchTheSpecTable) {
  const double lo = std::numeric_limits<double>::lowest();
  const double hi = std::numeric_limits<double>::max();
  const Case cases[] = {
      // MinSize(3): samples need 3 items; inserts never blocked.
      {1, 3, lo, hi, 2, 0, 0, 1, false, true},
      {1, 3, lo, hi, 3, 0, 0, 1, true, true},
      {1, 3, lo, hi, 3, 100, 0, 1, true, true},
      // Deletes take the table back below min size.
      {1, 3, lo, hi, 4, 0, 2, 1, false, true},
      {1, 3, lo, hi, 5, 0, 2, 1, true, true},
      // Queue(2): spi 1, min size 1, window [0, 2].
      {1, 1, 0, 2, 0, 0, 0, 1, false, true},
      {1, 1, 0, 2, 1, 0, 0, 1, true, true},
      {1, 1, 0, 2, 2, 0, 0, 1, true, false},
      {1, 1, 0, 2, 2, 1, 1, 1, true, true},
      {1, 1, 0, 2, 2, 2, 2, 1, false, true},
      // Asking for more than one sample at once.
      {1, 1, 0, 2, 2, 0, 0, 2, true, false},
      {1, 1, 0, 2, 2, 0, 0, 3, false, false},
      // SampleToInsertRatio(spi=2, min_size=2, error_buffer=3): [1, 7].
      {2, 2, 1, 7, 1, 0, 0, 1, false, true},
      {2, 2, 1, 7, 2, 0, 0, 1, true, true},
      {2, 2, 1, 7, 2, 3, 0, 1, false, true},
      {2, 2, 1, 7, 3, 0, 0, 1, true, false},
      {2, 2, 1, 7, 3, 2, 0, 1, true, true},
      // Below min size inserts are free even when the cursor is high.
      {2, 5, 1, 3, 4, 0, 0, 1, false, true},
      {2, 5, 1, 3, 5, 0, 0, 1, true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "spi=" << c.spi << " min_size=" << c.min_size << " diff=["
                 << c.min_diff << "," << c.max_diff << "] i=" << c.inserts
                 << " s=" << c.samples << " d=" << c.deletes << " n=" << c.n);
    auto checkpoint =
        Make(c.spi, c.min_size, c.min_diff, c.max_diff).CheckpointState();
    checkpoint.set_insert_count(c.inserts);
    checkpoint.set_sample_count(c.samples);
    checkpoint.set_delete_count(c.deletes);
    auto limiter = RateLimiter::FromCheckpoint(checkpoint);
    ASSERT_TRUE(limiter.ok());
    EXPECT_EQ(limiter->CanSample(c.n), c.can_sample);
    EXPECT_EQ(limiter->CanInsert(c.n), c.can_insert);
  }
}

TEST(RateLimiterTest, MaybeCommitSampleCountsOnlyAllowedSamples) {
  RateLimiter limiter = Make(1, 1, 0, 10);
  EXPECT_FALSE(limiter.MaybeCommitSample());
  Insert(&limiter, 2);
  EXPECT_TRUE(limiter.MaybeCommitSample());
  EXPECT_TRUE(limiter.MaybeCommitSample());
  EXPECT_FALSE(limiter.MaybeCommitSample());
  EXPECT_EQ(limiter.samples(), 2);
}

TEST(RateLimiterTest, DeletesCrossingMinSizeBlockSamplesAgain) {
  RateLimiter limiter = Make(1, 3, -1e9, 1e9);
  Insert(&limiter, 3);
  EXPECT_TRUE(limiter.CanSample(1));
  limiter.Delete();
  EXPECT_FALSE(limiter.CanSample(1));
  limiter.Insert();
  EXPECT_TRUE(limiter.CanSample(1));
}

TEST(RateLimiterTest, DeletesUnblockInsertsBelowMinSize) {
  RateLimiter limiter = Make(1, 2, 0, 1);
  Insert(&limiter, 2);
  EXPECT_FALSE(limiter.CanInsert(1));  // 3 * 1 - 0 > 1 and size 3 > 2.
  limiter.Delete();
  EXPECT_TRUE(limiter.CanInsert(1));  // Size would be 2 <= min size.
}

TEST(RateLimiterTest, ResetZeroesCountersKeepsSettings) {
  RateLimiter limiter = Make(1.5, 2, -3, 4);
  Insert(&limiter, 4);
  ASSERT_TRUE(limiter.MaybeCommitSample());
  limiter.Delete();
  limiter.Reset();
  EXPECT_EQ(limiter.inserts(), 0);
  EXPECT_EQ(limiter.samples(), 0);
  EXPECT_EQ(limiter.deletes(), 0);
  EXPECT_EQ(limiter.samples_per_insert(), 1.5);
  EXPECT_FALSE(limiter.CanSample(1));
}

TEST(RateLimiterTest, InfoAndCheckpointRoundTrip) {
  RateLimiter limiter = Make(2, 3, -4, 5);
  Insert(&limiter, 6);
  ASSERT_TRUE(limiter.MaybeCommitSample());
  limiter.Delete();
  RateLimiterInfo info = limiter.Info();
  EXPECT_EQ(info.samples_per_insert(), 2);
  EXPECT_EQ(info.min_size_to_sample(), 3);
  EXPECT_EQ(info.min_diff(), -4);
  EXPECT_EQ(info.max_diff(), 5);
  EXPECT_EQ(info.insert_stats().completed(), 6);
  EXPECT_EQ(info.sample_stats().completed(), 1);

  auto restored = RateLimiter::FromCheckpoint(limiter.CheckpointState());
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->inserts(), 6);
  EXPECT_EQ(restored->samples(), 1);
  EXPECT_EQ(restored->deletes(), 1);
  EXPECT_EQ(restored->Info().SerializeAsString(), info.SerializeAsString());

  RateLimiterCheckpoint bad = limiter.CheckpointState();
  bad.set_samples_per_insert(0);
  EXPECT_FALSE(RateLimiter::FromCheckpoint(bad).ok());
}

}  // namespace
}  // namespace deepmind::reverb
