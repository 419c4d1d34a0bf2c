#include "cc/selectors/heap.h"

#include <cmath>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(HeapSelectorTest, MinHeapPicksLowestPriority) {
  HeapSelector selector(/*min_heap=*/true);
  ASSERT_TRUE(selector.Insert(1, 3.0).ok());
  ASSERT_TRUE(selector.Insert(2, -1.0).ok());
  ASSERT_TRUE(selector.Insert(3, 2.0).ok());
  EXPECT_EQ(selector.Sample().key, 2u);
  EXPECT_EQ(selector.Sample().probability, 1.0);
  ASSERT_TRUE(selector.Delete(2).ok());
  EXPECT_EQ(selector.Sample().key, 3u);
}

TEST(HeapSelectorTest, MaxHeapPicksHighestPriority) {
  HeapSelector selector(/*min_heap=*/false);
  ASSERT_TRUE(selector.Insert(1, 3.0).ok());
  ASSERT_TRUE(selector.Insert(2, 5.0).ok());
  ASSERT_TRUE(selector.Insert(3, 4.0).ok());
  EXPECT_EQ(selector.Sample().key, 2u);
  ASSERT_TRUE(selector.Update(2, 0.0).ok());
  EXPECT_EQ(selector.Sample().key, 3u);
}

TEST(HeapSelectorTest, TiesGoToLeastRecentlyInserted) {
  HeapSelector selector(true);
  for (Key k : {7, 4, 9}) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  EXPECT_EQ(selector.Sample().key, 7u);
  ASSERT_TRUE(selector.Delete(7).ok());
  EXPECT_EQ(selector.Sample().key, 4u);
}

TEST(HeapSelectorTest, UpdateMovesKeyBehindItsTies) {
  HeapSelector selector(true);
  for (Key k : {1, 2, 3}) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  // Same priority, but key 1 is now the most recently updated.
  ASSERT_TRUE(selector.Update(1, 1.0).ok());
  EXPECT_EQ(selector.Sample().key, 2u);
  ASSERT_TRUE(selector.Update(2, 1.0).ok());
  EXPECT_EQ(selector.Sample().key, 3u);
  ASSERT_TRUE(selector.Update(3, 1.0).ok());
  EXPECT_EQ(selector.Sample().key, 1u);
}

TEST(HeapSelectorTest, RejectsNanAndUnknownKeys) {
  HeapSelector selector(true);
  EXPECT_EQ(selector.Insert(1, std::nan("")).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(selector.Insert(1, 1).ok());
  EXPECT_EQ(selector.Update(1, std::nan("")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Insert(1, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Delete(2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Update(2, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.size(), 1);
  EXPECT_EQ(selector.Sample().key, 1u);
}

TEST(HeapSelectorTest, OrdersManyKeysLikeASort) {
  HeapSelector selector(true);
  for (Key k = 0; k < 1000; ++k) {
    ASSERT_TRUE(
        selector.Insert(k, static_cast<double>((k * 7919) % 1000)).ok());
  }
  double last = -1;
  for (int i = 0; i < 1000; ++i) {
    auto pick = selector.Sample();
    const double priority = static_cast<double>((pick.key * 7919) % 1000);
    EXPECT_GE(priority, last);
    last = priority;
    ASSERT_TRUE(selector.Delete(pick.key).ok());
  }
}

TEST(HeapSelectorTest, Options) {
  EXPECT_TRUE(HeapSelector(true).options().heap().min_heap());
  EXPECT_FALSE(HeapSelector(false).options().heap().min_heap());
  EXPECT_TRUE(HeapSelector(false).options().is_deterministic());
}

}  // namespace
}  // namespace deepmind::reverb
