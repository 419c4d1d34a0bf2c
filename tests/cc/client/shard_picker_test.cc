#include "cc/client/shard_picker.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::ChiSquare;
using testing::ChiSquareCritical;

Shards::Weights Weighted(std::vector<double> weight, bool round_robin) {
  Shards::Weights weights;
  weights.round_robin = round_robin;
  for (double w : weight) weights.total += w;
  weights.weight = std::move(weight);
  return weights;
}

TEST(ShardPickerTest, DrawsShardsInProportionToTheirWeights) {
  ShardPicker picker;
  const Shards::Weights weights = Weighted({1, 0, 3, 4}, false);
  constexpr int kDraws = 100'000;
  std::vector<int64_t> counts(4);
  for (int i = 0; i < kDraws; ++i) {
    const ShardPicker::Pick pick = picker.Next(weights);
    ASSERT_GE(pick.shard, 0);
    EXPECT_EQ(pick.share, weights.weight[pick.shard] / 8);
    ++counts[pick.shard];
  }
  EXPECT_EQ(counts[1], 0);
  const std::vector<int64_t> drawn = {counts[0], counts[2], counts[3]};
  EXPECT_LT(ChiSquare(drawn, {1.0 / 8, 3.0 / 8, 4.0 / 8}),
            ChiSquareCritical(2));
}

TEST(ShardPickerTest, RoundRobinTakesTheShardsWithWeightInTurn) {
  ShardPicker picker;
  std::vector<int> shards;
  const Shards::Weights first = Weighted({1, 0, 1, 1}, true);
  for (int i = 0; i < 4; ++i) {
    const ShardPicker::Pick pick = picker.Next(first);
    EXPECT_EQ(pick.share, 1.0);
    shards.push_back(pick.shard);
  }
  // New weights: it goes on from where it was (after shard 0).
  const Shards::Weights second = Weighted({1, 0, 0, 1}, true);
  for (int i = 0; i < 3; ++i) shards.push_back(picker.Next(second).shard);
  EXPECT_EQ(shards, std::vector<int>({0, 2, 3, 0, 3, 0, 3}));
}

TEST(ShardPickerTest, NoShardWithoutWeight) {
  ShardPicker picker;
  EXPECT_EQ(picker.Next(Weighted({0, 0}, false)).shard, -1);
  EXPECT_EQ(picker.Next(Weighted({0, 0}, true)).shard, -1);
}

}  // namespace
}  // namespace deepmind::reverb
