#include "cc/selectors/uniform.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

TEST(UniformSelectorTest, RejectsDuplicateAndMissingKeys) {
  UniformSelector selector;
  ASSERT_TRUE(selector.Insert(1, 1).ok());
  EXPECT_EQ(selector.Insert(1, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Update(2, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Delete(2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.size(), 1);
}

TEST(UniformSelectorTest, SamplesOnlyPresentKeysWithProbabilityOneOverSize) {
  UniformSelector selector;
  for (Key k = 0; k < 10; ++k) ASSERT_TRUE(selector.Insert(k, k).ok());
  ASSERT_TRUE(selector.Delete(3).ok());
  ASSERT_TRUE(selector.Delete(9).ok());
  for (int i = 0; i < 1000; ++i) {
    auto pick = selector.Sample();
    EXPECT_NE(pick.key, 3u);
    EXPECT_NE(pick.key, 9u);
    EXPECT_LT(pick.key, 10u);
    EXPECT_DOUBLE_EQ(pick.probability, 1.0 / 8);
  }
}

TEST(UniformSelectorTest, FrequenciesAreUniform) {
  UniformSelector selector;
  constexpr int kKeys = 10;
  for (Key k = 0; k < kKeys; ++k) ASSERT_TRUE(selector.Insert(k, 100 * k).ok());
  std::vector<int64_t> counts(kKeys);
  for (int i = 0; i < 200'000; ++i) ++counts[selector.Sample().key];
  EXPECT_LT(testing::ChiSquare(counts, std::vector<double>(kKeys, 0.1)),
            testing::ChiSquareCritical(kKeys - 1));
}

TEST(UniformSelectorTest, ClearAndOptions) {
  UniformSelector selector;
  ASSERT_TRUE(selector.Insert(1, 1).ok());
  selector.Clear();
  EXPECT_EQ(selector.size(), 0);
  EXPECT_TRUE(selector.Insert(1, 1).ok());
  EXPECT_TRUE(selector.options().uniform());
  EXPECT_FALSE(selector.options().is_deterministic());
}

}  // namespace
}  // namespace deepmind::reverb
