#include "cc/selectors/fifo.h"

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(FifoSelectorTest, SamplesOldestInsertedFirst) {
  FifoSelector selector;
  for (Key k : {5, 3, 9}) ASSERT_TRUE(selector.Insert(k, 0).ok());
  EXPECT_EQ(selector.Sample().key, 5u);
  EXPECT_EQ(selector.Sample().probability, 1.0);
  ASSERT_TRUE(selector.Delete(5).ok());
  EXPECT_EQ(selector.Sample().key, 3u);
  ASSERT_TRUE(selector.Delete(3).ok());
  EXPECT_EQ(selector.Sample().key, 9u);
}

TEST(FifoSelectorTest, UpdateDoesNotMoveKey) {
  FifoSelector selector;
  ASSERT_TRUE(selector.Insert(1, 0).ok());
  ASSERT_TRUE(selector.Insert(2, 0).ok());
  ASSERT_TRUE(selector.Update(1, 100).ok());
  EXPECT_EQ(selector.Sample().key, 1u);
  EXPECT_EQ(selector.Update(3, 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(FifoSelectorTest, DeleteFromMiddleKeepsOrder) {
  FifoSelector selector;
  for (Key k = 1; k <= 4; ++k) ASSERT_TRUE(selector.Insert(k, 0).ok());
  ASSERT_TRUE(selector.Delete(2).ok());
  ASSERT_TRUE(selector.Delete(1).ok());
  EXPECT_EQ(selector.Sample().key, 3u);
  EXPECT_EQ(selector.Delete(2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Insert(3, 0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(FifoSelectorTest, Options) {
  EXPECT_TRUE(FifoSelector().options().fifo());
  EXPECT_TRUE(FifoSelector().options().is_deterministic());
  EXPECT_TRUE(LifoSelector().options().lifo());
  EXPECT_TRUE(LifoSelector().options().is_deterministic());
}

TEST(LifoSelectorTest, SamplesNewestInsertedFirst) {
  LifoSelector selector;
  for (Key k : {5, 3, 9}) ASSERT_TRUE(selector.Insert(k, 0).ok());
  EXPECT_EQ(selector.Sample().key, 9u);
  ASSERT_TRUE(selector.Delete(9).ok());
  EXPECT_EQ(selector.Sample().key, 3u);
  ASSERT_TRUE(selector.Update(5, 10).ok());
  EXPECT_EQ(selector.Sample().key, 3u);
  ASSERT_TRUE(selector.Insert(7, 0).ok());
  EXPECT_EQ(selector.Sample().key, 7u);
  selector.Clear();
  EXPECT_EQ(selector.size(), 0);
}

}  // namespace
}  // namespace deepmind::reverb
