// Chunks built in shared memory (built_chunk.h, SharedMemoryClient::
// BuildChunk): what reads a writer's chunks finds their bytes, size and
// content; a TrajectoryWriter over gRPC builds its large steps in segments
// its server keeps; the in-process path takes a built chunk as its bytes.
#include "cc/client/built_chunk.h"

#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/cord.h"
#include "cc/client/insert_stream.h"
#include "cc/client/trajectory_writer.h"
#include "cc/tensor/compression.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/cc/client/writer_test_util.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::FifoTable;

// Random int32 values (snappy does not shrink them).
std::vector<int32_t> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<int32_t> values(n);
  for (int32_t& value : values) value = static_cast<int32_t>(random());
  return values;
}

// A chunk of one row of `values`, key `key`.
ChunkData ChunkOf(uint64_t key, const std::vector<int32_t>& values) {
  ChunkData chunk;
  chunk.set_chunk_key(key);
  chunk.mutable_sequence_range()->set_episode_id(3);
  chunk.set_data_tensors_len(1);
  chunk.set_data_uncompressed_size(
      static_cast<int64_t>(values.size() * sizeof(int32_t)));
  const Tensor row = testing::MakeTensor(
      tensorflow::DT_INT32, {1, static_cast<int64_t>(values.size())}, values);
  EXPECT_TRUE(
      CompressTensorAsProto(row, chunk.mutable_data()->add_tensors()).ok());
  return chunk;
}

// `chunk` as a BuiltChunk of its serialization.
std::shared_ptr<const ChunkData> Built(const ChunkData& chunk) {
  auto built = std::make_unique<BuiltChunk>();
  built->header = chunk;
  built->header.mutable_data()->mutable_tensors(0)->clear_tensor_content();
  built->bytes = absl::Cord(chunk.SerializeAsString());
  return MakeBuiltChunk(std::move(built));
}

TEST(BuiltChunkTest, ReadersFindItsBytesSizeAndContent) {
  const ChunkData chunk = ChunkOf(1, RandomValues(1000, 1));
  const std::shared_ptr<const ChunkData> built = Built(chunk);
  const BuiltChunk* found = FindBuiltChunk(built);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(&found->header, built.get());
  EXPECT_EQ(found->bytes, chunk.SerializeAsString());
  // Copies find it too.
  std::vector<std::shared_ptr<const ChunkData>> copies = {built};
  EXPECT_EQ(FindBuiltChunk(copies[0]), found);
  EXPECT_EQ(ChunkWireSize(built), chunk.ByteSizeLong());
  auto whole = WholeChunk(built);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(MessageDifferencer::Equals(**whole, chunk));

  // A chunk of its own content is none.
  const auto plain = std::make_shared<const ChunkData>(chunk);
  EXPECT_EQ(FindBuiltChunk(plain), nullptr);
  EXPECT_EQ(ChunkWireSize(plain), chunk.ByteSizeLong());
  EXPECT_EQ(*WholeChunk(plain), plain);

  auto damaged = std::make_unique<BuiltChunk>();
  damaged->bytes = absl::Cord("\xff");
  EXPECT_EQ(WholeChunk(MakeBuiltChunk(std::move(damaged))).status().code(),
            absl::StatusCode::kInternal);
}

class BuiltChunkServerTest : public testing::ConnectedServerTest {};

TEST_F(BuiltChunkServerTest, AWritersLargeStepsAreBuiltInSegments) {
  testing::GrpcOnly grpc_only;  // As from another process of the host.
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  auto writer = *TrajectoryWriter::Create(
      connection_, std::make_shared<ConstantChunkerOptions>(1, 1));
  std::vector<std::vector<int32_t>> steps;
  std::vector<std::shared_ptr<const ChunkData>> chunks;
  for (uint32_t i = 0; i < 4; ++i) {
    steps.push_back(RandomValues(1 << 18, i));  // 1 MiB.
    const Tensor step =
        testing::MakeTensor(tensorflow::DT_INT32, {1 << 18}, steps.back());
    auto refs = writer->Append({std::optional<TensorView>(step)});
    ASSERT_TRUE(refs.ok()) << refs.status();
    const std::shared_ptr<CellRef> ref = (*refs)[0]->lock();
    ASSERT_TRUE(writer->CreateItem("t", 1.0, {{{ref}}}).ok());
    ASSERT_TRUE(writer->Flush(0, absl::Seconds(30)).ok());
    chunks.push_back(ref->GetChunk());
    // Its data read back, as history reads it.
    auto data = ref->GetData();
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(testing::Values<int32_t>(*data), steps.back());
  }
  // The first step was chunked before the stream (and its session) was
  // open; the others are built in the server's segments.
  EXPECT_EQ(FindBuiltChunk(chunks[0]), nullptr);
  for (int i = 1; i < 4; ++i) {
    const BuiltChunk* built = FindBuiltChunk(chunks[i]);
    ASSERT_NE(built, nullptr) << i;
    EXPECT_TRUE(built->sent);
  }
  const auto stored = testing::StoredItems(*table);
  ASSERT_EQ(stored.size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(stored[i].columns, (std::vector<std::vector<int32_t>>{steps[i]}));
  }
  writer->Close();
}

TEST_F(BuiltChunkServerTest, TheInProcessPathTakesABuiltChunkAsItsBytes) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  const std::vector<int32_t> values = RandomValues(5000, 7);
  const ChunkData chunk = ChunkOf(9, values);
  auto stream = InsertStream::Open(
      connection_, absl::Seconds(30), [](absl::Span<const uint64_t>) {}, [] {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  InsertStreamRequest request;
  *request.add_items() = testing::MakePrioritizedItem(1, "t", 9);
  ASSERT_TRUE((*stream)->Write(request, {Built(chunk)},
                               InsertStream::Then::kMoreChunksFollow));
  ASSERT_TRUE((*stream)->Close().ok());
  EXPECT_EQ(table->info().num_local_inserts(), 1);
  const Table::CheckpointData data = table->Checkpoint();
  ASSERT_EQ(data.chunks.size(), 1);
  EXPECT_EQ(data.chunks[0]->wire(), chunk.SerializeAsString());
  const auto stored = testing::StoredItems(*table);
  ASSERT_EQ(stored.size(), 1);
  EXPECT_EQ(stored[0].columns, (std::vector<std::vector<int32_t>>{values}));
}

}  // namespace
}  // namespace deepmind::reverb
