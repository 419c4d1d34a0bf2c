#include "cc/client/arena_chunk.h"

#include <string>
#include <utility>

#include "cc/support/buffer_pool.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(ArenaChunkTest, LargeContentsGoBackToThePoolWithTheLastReference) {
  BufferPool& pool = BufferPool::Default();
  std::string large = pool.Take(BufferPool::kMinBytes * 2);
  const char* large_data = large.data();
  std::shared_ptr<ChunkData> chunk = NewArenaChunk();
  chunk->set_chunk_key(7);
  chunk->mutable_data()->add_tensors()->set_tensor_content(std::move(large));
  chunk->mutable_data()->add_tensors()->set_tensor_content("small");
  EXPECT_EQ(chunk->data().tensors(0).tensor_content().data(), large_data);
  std::shared_ptr<const ChunkData> other = chunk;
  const int64_t kept_before = pool.given_kept();
  chunk.reset();
  EXPECT_EQ(pool.given_kept(), kept_before);  // `other` still reads it.
  EXPECT_EQ(other->data().tensors(1).tensor_content(), "small");
  other.reset();
  EXPECT_EQ(pool.given_kept(), kept_before + 1);  // The small one is freed.
  std::string again = pool.Take(BufferPool::kMinBytes * 2);
  EXPECT_EQ(again.data(), large_data);
}

}  // namespace
}  // namespace deepmind::reverb
