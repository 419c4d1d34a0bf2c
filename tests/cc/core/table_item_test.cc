#include "cc/core/table_item.h"

#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::MakeChunk;
using testing::MakeItem;

TEST(TableItemTest, ChunkKeysAreDistinctInOrderOfFirstUse) {
  FlatTrajectory trajectory;
  auto* a = trajectory.add_columns();
  a->add_chunk_slices()->set_chunk_key(3);
  a->add_chunk_slices()->set_chunk_key(1);
  auto* b = trajectory.add_columns();
  b->add_chunk_slices()->set_chunk_key(1);
  b->add_chunk_slices()->set_chunk_key(2);
  EXPECT_EQ(GetChunkKeys(trajectory), (std::vector<uint64_t>{3, 1, 2}));
}

TEST(TableItemTest, ValidItemPasses) {
  EXPECT_TRUE(
      ValidateTableItem(MakeItem(1, 1.0, {MakeChunk(10), MakeChunk(11)})).ok());
}

TEST(TableItemTest, EmptyTrajectoryIsRejected) {
  TableItem item = MakeItem(1);
  item.item.mutable_flat_trajectory()->clear_columns();
  item.chunks.clear();
  EXPECT_EQ(ValidateTableItem(item).code(), absl::StatusCode::kInvalidArgument);
  item.item.mutable_flat_trajectory()->add_columns();
  EXPECT_EQ(ValidateTableItem(item).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TableItemTest, EveryColumnNeedsASlice) {
  TableItem item = MakeItem(1);
  ASSERT_TRUE(ValidateTableItem(item).ok());
  item.item.mutable_flat_trajectory()->add_columns();
  EXPECT_EQ(ValidateTableItem(item).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TableItemTest, ChunksMustMatchTheTrajectory) {
  TableItem missing = MakeItem(1, 1.0, {MakeChunk(10), MakeChunk(11)});
  missing.chunks.pop_back();
  EXPECT_EQ(ValidateTableItem(missing).code(),
            absl::StatusCode::kInvalidArgument);

  TableItem swapped = MakeItem(1, 1.0, {MakeChunk(10), MakeChunk(11)});
  std::swap(swapped.chunks[0], swapped.chunks[1]);
  EXPECT_EQ(ValidateTableItem(swapped).code(),
            absl::StatusCode::kInvalidArgument);

  TableItem null_chunk = MakeItem(1);
  null_chunk.chunks[0] = nullptr;
  EXPECT_EQ(ValidateTableItem(null_chunk).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TableItemTest, SlicesMustFitTheirChunk) {
  TableItem item = MakeItem(1, 1.0, {MakeChunk(10, 1, /*rows=*/3)});
  auto* slice = item.item.mutable_flat_trajectory()
                    ->mutable_columns(0)
                    ->mutable_chunk_slices(0);
  slice->set_offset(1);
  slice->set_length(2);
  EXPECT_TRUE(ValidateTableItem(item).ok());
  slice->set_length(3);
  EXPECT_EQ(ValidateTableItem(item).code(), absl::StatusCode::kInvalidArgument);
  slice->set_length(0);
  EXPECT_EQ(ValidateTableItem(item).code(), absl::StatusCode::kInvalidArgument);
  slice->set_length(1);
  slice->set_index(1);
  EXPECT_EQ(ValidateTableItem(item).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepmind::reverb
