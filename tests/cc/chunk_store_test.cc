#include "cc/chunk_store.h"

#include <thread>
#include <vector>

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
  EXPECT_EQ(chunk.DataByteSizeLong(), chunk.data().ByteSizeLong());
  EXPECT_EQ(Chunk(ChunkData()).uncompressed_data_size(), 1);
}

}  // namespace
}  // namespace deepmind::reverb
