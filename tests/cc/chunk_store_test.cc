#include "cc/chunk_store.h"

#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

TEST(ChunkStoreTest, InsertReturnsTheLiveChunkForAKnownKey) {
  ChunkStore store;
  auto first = store.Insert(testing::MakeChunkData(1, 7, 3));
  auto second = store.Insert(testing::MakeChunkData(1, 8, 1));
  EXPECT_EQ(first, second);
  EXPECT_EQ(second->episode_id(), 7u);
}

TEST(ChunkStoreTest, GetFindsLiveChunksInOrder) {
  ChunkStore store;
  auto a = store.Insert(testing::MakeChunkData(1));
  auto b = store.Insert(testing::MakeChunkData(2));
  std::vector<std::shared_ptr<Chunk>> chunks;
  ASSERT_TRUE(store.Get({2, 1}, &chunks).ok());
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], b);
  EXPECT_EQ(chunks[1], a);
}

TEST(ChunkStoreTest, ChunkIsGoneOnceTheLastHolderLetsGo) {
  ChunkStore store;
  auto chunk = store.Insert(testing::MakeChunkData(1));
  std::weak_ptr<Chunk> weak = chunk;
  auto other_holder = chunk;
  chunk.reset();
  std::vector<std::shared_ptr<Chunk>> chunks;
  EXPECT_TRUE(store.Get({1}, &chunks).ok());
  chunks.clear();
  other_holder.reset();
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(store.Get({1}, &chunks).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.num_live_chunks(), 0u);
}

TEST(ChunkStoreTest, DeadEntriesAreSwept) {
  ChunkStore store;
  for (uint64_t key = 0; key < 10'000; ++key) {
    store.Insert(testing::MakeChunkData(key));
  }
  auto kept = store.Insert(testing::MakeChunkData(123'456));
  EXPECT_EQ(store.num_live_chunks(), 1u);
}

TEST(ChunkStoreTest, ConcurrentInsertsOfOneKeyShareOneChunk) {
  ChunkStore store;
  std::vector<std::shared_ptr<Chunk>> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = store.Insert(testing::MakeChunkData(42)); });
  }
  for (auto& t : threads) t.join();
  for (const auto& chunk : results) EXPECT_EQ(chunk, results[0]);
}

TEST(ChunkTest, Accessors) {
  Chunk chunk(testing::MakeChunkData(5, 9, 4));
  EXPECT_EQ(chunk.key(), 5u);
  EXPECT_EQ(chunk.episode_id(), 9u);
  EXPECT_EQ(chunk.num_rows(), 4);
  EXPECT_EQ(chunk.num_columns(), 1);
  EXPECT_EQ(chunk.uncompressed_data_size(), 16);
  EXPECT_EQ(chunk.DataByteSizeLong(),
            testing::MakeChunkData(5, 9, 4).ByteSizeLong());
  EXPECT_EQ(Chunk(ChunkData()).uncompressed_data_size(), 1);
}

TEST(ChunkTest, ParseKeepsTheBytesAndReadsTheHeader) {
  ChunkData data = testing::MakeChunkData(5, 9, 4);
  *data.mutable_data()->add_tensors() = data.data().tensors(0);
  data.set_data_tensors_len(0);  // Columns then come from the tensors.
  data.set_delta_encoded(true);
  const std::string bytes = data.SerializeAsString();
  auto chunk = Chunk::Parse(absl::Cord(bytes));
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ((*chunk)->key(), 5u);
  EXPECT_EQ((*chunk)->episode_id(), 9u);
  EXPECT_EQ((*chunk)->num_rows(), 4);
  EXPECT_EQ((*chunk)->num_columns(), 2);
  EXPECT_EQ((*chunk)->uncompressed_data_size(), 16);
  EXPECT_EQ(std::string((*chunk)->wire()), bytes);
  EXPECT_EQ((*chunk)->DataByteSizeLong(), bytes.size());
  EXPECT_EQ((*chunk)->ToProto().SerializeAsString(), bytes);
}

TEST(ChunkTest, ParseSharesTheMemoryOfLargePieces) {
  ChunkData data = testing::MakeChunkData(5);
  data.mutable_data()->mutable_tensors(0)->set_tensor_content(
      std::string(64 << 10, 'x'));
  const std::string bytes = data.SerializeAsString();
  absl::Cord wire = absl::MakeCordFromExternal(bytes, [] {});
  auto chunk = Chunk::Parse(wire);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  ASSERT_TRUE((*chunk)->wire().TryFlat().has_value());
  EXPECT_EQ((*chunk)->wire().TryFlat()->data(), bytes.data());
}

TEST(ChunkTest, RowsOfAnyRangeDoNotOverflow) {
  ChunkData data = testing::MakeChunkData(5);
  data.mutable_sequence_range()->set_start(std::numeric_limits<int32_t>::min());
  data.mutable_sequence_range()->set_end(std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Chunk(data).num_rows(), std::numeric_limits<int32_t>::max());
  data.mutable_sequence_range()->set_start(7);
  data.mutable_sequence_range()->set_end(2);
  EXPECT_EQ(Chunk(data).num_rows(), 0);
}

TEST(ChunkTest, ParseRejectsWhatIsNotAChunk) {
  const std::string bytes = testing::MakeChunkData(5).SerializeAsString();
  const std::vector<std::string> malformed = {
      bytes.substr(0, bytes.size() - 1),  // Truncated.
      bytes + "\x08",                     // A tag without its value.
      bytes + "\x13",                     // A group's tag.
      "\x12\x02\x08\xff",              // sequence_range's varint ends early.
      "\x2a\x04\x0a\x02\x12\x05",    // A tensor whose shape runs past it.
      std::string("\x00", 1),             // Field 0.
  };
  for (const std::string& input : malformed) {
    EXPECT_EQ(Chunk::Parse(absl::Cord(input)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << absl::CEscape(input);
  }
}

}  // namespace
}  // namespace deepmind::reverb
