#include "cc/rate_limiters/presets.h"

#include <limits>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(PresetsTest, MinSize) {
  auto limiter = MinSizeRateLimiter(3);
  ASSERT_TRUE(limiter.ok());
  EXPECT_EQ(limiter->samples_per_insert(), 1.0);
  EXPECT_EQ(limiter->min_diff(), std::numeric_limits<double>::lowest());
  EXPECT_EQ(limiter->max_diff(), std::numeric_limits<double>::max());
  EXPECT_EQ(MinSizeRateLimiter(0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PresetsTest, SampleToInsertRatioValidation) {
  EXPECT_TRUE(SampleToInsertRatioRateLimiter(2, 10, 17, 23).ok());
  // samples_per_insert must be positive.
  EXPECT_FALSE(SampleToInsertRatioRateLimiter(0, 10, 0, 100).ok());
  // The buffer must span 2 * max(1, spi).
  EXPECT_FALSE(SampleToInsertRatioRateLimiter(2, 10, 17, 20.9).ok());
  EXPECT_TRUE(SampleToInsertRatioRateLimiter(2, 10, 17, 21).ok());
  EXPECT_FALSE(SampleToInsertRatioRateLimiter(0.5, 10, 0, 1.9).ok());
  // min_diff above spi * min_size would block sampling forever.
  EXPECT_FALSE(SampleToInsertRatioRateLimiter(1, 10, 11, 20).ok());
  EXPECT_FALSE(SampleToInsertRatioRateLimiter(1, 0, -10, 20).ok());
}

TEST(PresetsTest, DeadlockWarningCondition) {
  EXPECT_TRUE(MayDeadlockWithoutConcurrentSampling(
      *SampleToInsertRatioRateLimiter(1, 100, -10, 10)));
  EXPECT_FALSE(MayDeadlockWithoutConcurrentSampling(
      *SampleToInsertRatioRateLimiter(1, 100, 90, 110)));
}

TEST(PresetsTest, QueueAndStack) {
  for (auto limiter : {QueueRateLimiter(5), StackRateLimiter(5)}) {
    ASSERT_TRUE(limiter.ok());
    EXPECT_EQ(limiter->samples_per_insert(), 1.0);
    EXPECT_EQ(limiter->min_size_to_sample(), 1);
    EXPECT_EQ(limiter->min_diff(), 0.0);
    EXPECT_EQ(limiter->max_diff(), 5.0);
  }
  // As dm-reverb, size 0 is accepted; a negative size can never be met.
  EXPECT_TRUE(QueueRateLimiter(0).ok());
  EXPECT_FALSE(QueueRateLimiter(-1).ok());
  EXPECT_FALSE(StackRateLimiter(-1).ok());
}

}  // namespace
}  // namespace deepmind::reverb
