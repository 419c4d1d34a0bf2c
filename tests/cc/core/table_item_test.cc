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
  EXPECT_EQ(GetChunkKeys(trajectory), (ChunkKeys{3, 1, 2}));
}

TEST(TableItemTest, ManyChunkKeysAreDistinctInOrderOfFirstUse) {
  // Past the keys searched by a scan: 40 keys, each used three times, in
  // columns that go over them forwards, backwards and forwards again.
  FlatTrajectory trajectory;
  for (int pass = 0; pass < 3; ++pass) {
    auto* column = trajectory.add_columns();
    for (int i = 0; i < 40; ++i) {
      column->add_chunk_slices()->set_chunk_key(pass == 1 ? 139 - i : 100 + i);
    }
  }
  ChunkKeys expected;
  for (int i = 0; i < 40; ++i) expected.push_back(100 + i);
  EXPECT_EQ(GetChunkKeys(trajectory), expected);
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

TEST(TableItemTest, SlicesOfItemsOfManyChunksAreCheckedAgainstTheirOwn) {
  // More chunks than are searched by a scan: chunk 10 + i has i + 1 rows,
  // and each slice reads the last row of its chunk.
  std::vector<std::shared_ptr<Chunk>> chunks;
  for (int i = 0; i < 40; ++i) chunks.push_back(MakeChunk(10 + i, 1, i + 1));
  TableItem item = MakeItem(1, 1.0, chunks);
  auto* column = item.item.mutable_flat_trajectory()->mutable_columns(0);
  for (int i = 0; i < 40; ++i) column->mutable_chunk_slices(i)->set_offset(i);
  EXPECT_TRUE(ValidateTableItem(item).ok());
  // One row past its own chunk (though within a larger one's).
  column->mutable_chunk_slices(30)->set_offset(31);
  EXPECT_EQ(ValidateTableItem(item).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepmind::reverb
