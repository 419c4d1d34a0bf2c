#include "cc/selectors/prioritized.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

constexpr int kDraws = 300'000;

std::vector<int64_t> Draw(PrioritizedSelector* selector, int num_keys) {
  std::vector<int64_t> counts(num_keys);
  for (int i = 0; i < kDraws; ++i) ++counts[selector->Sample().key];
  return counts;
}

TEST(PrioritizedSelectorTest, FrequenciesFollowPriorityToTheExponent) {
  for (double exponent : {1.0, 0.5, 2.0}) {
    SCOPED_TRACE(exponent);
    PrioritizedSelector selector(exponent, /*seed=*/42);
    std::vector<double> probabilities;
    double total = 0;
    for (Key k = 0; k < 6; ++k) {
      ASSERT_TRUE(selector.Insert(k, k + 1.0).ok());
      total += std::pow(k + 1.0, exponent);
    }
    for (Key k = 0; k < 6; ++k) {
      probabilities.push_back(std::pow(k + 1.0, exponent) / total);
    }
    EXPECT_LT(testing::ChiSquare(Draw(&selector, 6), probabilities),
              testing::ChiSquareCritical(5));
  }
}

TEST(PrioritizedSelectorTest, ReturnsExactProbability) {
  PrioritizedSelector selector(1.0, 1);
  ASSERT_TRUE(selector.Insert(0, 1.0).ok());
  ASSERT_TRUE(selector.Insert(1, 3.0).ok());
  for (int i = 0; i < 100; ++i) {
    auto pick = selector.Sample();
    EXPECT_DOUBLE_EQ(pick.probability, pick.key == 0 ? 0.25 : 0.75);
  }
}

TEST(PrioritizedSelectorTest, ZeroPriorityIsNeverSampledEvenWithExponentZero) {
  PrioritizedSelector selector(0.0, 7);
  ASSERT_TRUE(selector.Insert(0, 0.0).ok());
  ASSERT_TRUE(selector.Insert(1, 5.0).ok());
  ASSERT_TRUE(selector.Insert(2, 0.1).ok());
  std::vector<int64_t> counts = Draw(&selector, 3);
  EXPECT_EQ(counts[0], 0);
  // Exponent 0: every non-zero priority weighs 1.
  EXPECT_LT(testing::ChiSquare({counts[1], counts[2]}, {0.5, 0.5}),
            testing::ChiSquareCritical(1));
}

TEST(PrioritizedSelectorTest, AllZeroPrioritiesSampleUniformly) {
  PrioritizedSelector selector(1.0, 3);
  for (Key k = 0; k < 4; ++k) ASSERT_TRUE(selector.Insert(k, 0.0).ok());
  EXPECT_DOUBLE_EQ(selector.Sample().probability, 0.25);
  EXPECT_LT(testing::ChiSquare(Draw(&selector, 4), {0.25, 0.25, 0.25, 0.25}),
            testing::ChiSquareCritical(3));
}

TEST(PrioritizedSelectorTest, RejectsNanAndNegativePriorities) {
  PrioritizedSelector selector(1.0, 3);
  EXPECT_EQ(selector.Insert(1, -1.0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Insert(1, std::nan("")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.size(), 0);
  ASSERT_TRUE(selector.Insert(1, 1.0).ok());
  EXPECT_EQ(selector.Update(1, -0.5).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Update(1, std::nan("")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Sample().key, 1u);
  EXPECT_DOUBLE_EQ(selector.Sample().probability, 1.0);
}

TEST(PrioritizedSelectorTest, UpdatesAndDeletesChangeTheDistribution) {
  PrioritizedSelector selector(1.0, 11);
  for (Key k = 0; k < 5; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  ASSERT_TRUE(selector.Delete(0).ok());  // Moves key 4 into slot 0.
  ASSERT_TRUE(selector.Update(4, 6.0).ok());
  ASSERT_TRUE(selector.Update(2, 0.0).ok());
  std::vector<int64_t> counts = Draw(&selector, 5);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[2], 0);
  EXPECT_LT(testing::ChiSquare({counts[1], counts[3], counts[4]},
                               {1.0 / 8, 1.0 / 8, 6.0 / 8}),
            testing::ChiSquareCritical(2));
}

TEST(PrioritizedSelectorTest, GrowsBeyondInitialCapacity) {
  PrioritizedSelector selector(1.0, 5);
  const Key n = PrioritizedSelector::kInitialCapacity + 10;
  for (Key k = 0; k < n; ++k) ASSERT_TRUE(selector.Insert(k, 0.0).ok());
  ASSERT_TRUE(selector.Update(n - 1, 1.0).ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(selector.Sample().key, n - 1);
  for (Key k = 0; k < n; ++k) ASSERT_TRUE(selector.Delete(k).ok());
  EXPECT_EQ(selector.size(), 0);
}

TEST(PrioritizedSelectorTest, RecomputesSumsWhenRoundingDrifts) {
  PrioritizedSelector selector(1.0, 9);
  // 1e17 + 1 rounds to 1e17: the weight of key 1 is lost from the root sum
  // and removing key 0 leaves a root sum of 0 instead of 1.
  ASSERT_TRUE(selector.Insert(0, 1e17).ok());
  ASSERT_TRUE(selector.Insert(1, 1.0).ok());
  ASSERT_TRUE(selector.Update(0, 0.0).ok());
  EXPECT_GT(selector.num_recomputations(), 0);
  for (int i = 0; i < 100; ++i) {
    auto pick = selector.Sample();
    EXPECT_EQ(pick.key, 1u);
    EXPECT_DOUBLE_EQ(pick.probability, 1.0);
  }
}

TEST(PrioritizedSelectorTest, UpdateManyIsUpdateOneKeyAtATime) {
  // Past the initial capacity, so that nodes are deep.
  constexpr Key kKeys = PrioritizedSelector::kInitialCapacity + 1000;
  PrioritizedSelector batched(0.7, /*seed=*/3), single(0.7, /*seed=*/3);
  for (Key k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(batched.Insert(k, 1.0 + k % 7).ok());
    ASSERT_TRUE(single.Insert(k, 1.0 + k % 7).ok());
  }
  // Spread over the table, with a missing key, a key twice, NaN, a
  // negative and a zero priority among them.
  std::vector<Key> keys;
  std::vector<double> priorities;
  for (Key k = 0; k < kKeys; k += 97) {
    keys.push_back(k);
    priorities.push_back(0.5 + k % 11);
  }
  keys.insert(keys.begin() + 3, {kKeys + 5, 97, 194, 291, 388, 97});
  priorities.insert(priorities.begin() + 3,
                    {2.0, std::nan(""), -1.0, 0.0, 3.0, 8.0});
  std::vector<absl::Status> statuses(keys.size());
  batched.UpdateMany(keys, priorities, absl::MakeSpan(statuses));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(statuses[i], single.Update(keys[i], priorities[i])) << i;
  }
  EXPECT_FALSE(statuses[3].ok());  // The missing key.
  EXPECT_FALSE(statuses[4].ok());  // NaN.
  EXPECT_FALSE(statuses[5].ok());  // Negative.
  EXPECT_EQ(batched.weight_sum(), single.weight_sum());
  for (int i = 0; i < 10'000; ++i) {
    const auto a = batched.Sample();
    const auto b = single.Sample();
    ASSERT_EQ(a.key, b.key) << i;
    ASSERT_EQ(a.probability, b.probability) << i;
  }
}

TEST(PrioritizedSelectorTest, SameSeedSameSequence) {
  PrioritizedSelector a(1.0, 99), b(1.0, 99);
  for (Key k = 0; k < 100; ++k) {
    ASSERT_TRUE(a.Insert(k, k + 1.0).ok());
    ASSERT_TRUE(b.Insert(k, k + 1.0).ok());
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Sample().key, b.Sample().key);
}

TEST(PrioritizedSelectorTest, Options) {
  PrioritizedSelector selector(0.7);
  EXPECT_DOUBLE_EQ(selector.options().prioritized().priority_exponent(), 0.7);
  EXPECT_FALSE(selector.options().is_deterministic());
}

}  // namespace
}  // namespace deepmind::reverb
