#include "cc/client/sampled_keys.h"

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(SampledKeysTest, AKeyIsWhereItWasLastSampled) {
  SampledKeys keys;
  EXPECT_EQ(keys.ShardOf(7), -1);
  keys.Record(7, 2);
  keys.Record(8, 0);
  EXPECT_EQ(keys.ShardOf(7), 2);
  EXPECT_EQ(keys.ShardOf(8), 0);
  keys.Record(7, 1);
  EXPECT_EQ(keys.ShardOf(7), 1);
}

TEST(SampledKeysTest, RemembersTheLastCapacityKeysRecorded) {
  SampledKeys keys(/*capacity=*/3);
  for (uint64_t key = 1; key <= 5; ++key) keys.Record(key, 0);
  EXPECT_EQ(keys.ShardOf(1), -1);
  EXPECT_EQ(keys.ShardOf(2), -1);
  for (uint64_t key = 3; key <= 5; ++key) EXPECT_EQ(keys.ShardOf(key), 0);
}

TEST(SampledKeysTest, AKeyRecordedAgainCountsFromThen) {
  SampledKeys keys(/*capacity=*/3);
  keys.Record(1, 0);
  keys.Record(2, 0);
  keys.Record(1, 1);  // The oldest record of 1 is stale now.
  keys.Record(3, 0);  // Takes the place of that stale record: 1 stays.
  EXPECT_EQ(keys.ShardOf(1), 1);
  EXPECT_EQ(keys.ShardOf(2), 0);
  keys.Record(4, 0);  // Takes 2's place.
  EXPECT_EQ(keys.ShardOf(2), -1);
  EXPECT_EQ(keys.ShardOf(1), 1);
  keys.Record(5, 0);  // Takes the place of 1's newer record.
  EXPECT_EQ(keys.ShardOf(1), -1);
  EXPECT_EQ(keys.ShardOf(3), 0);
}

}  // namespace
}  // namespace deepmind::reverb
