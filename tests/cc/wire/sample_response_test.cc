#include "cc/wire/sample_response.h"

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {
namespace {

std::shared_ptr<Chunk> MakeChunk(uint64_t key, size_t content_bytes) {
  ChunkData data;
  data.set_chunk_key(key);
  data.set_data_tensors_len(1);
  data.mutable_sequence_range()->set_episode_id(7);
  auto* tensor = data.mutable_data()->add_tensors();
  tensor->set_dtype(tensorflow::DT_UINT8);
  tensor->mutable_tensor_shape()->add_dim()->set_size(1);
  tensor->set_tensor_content(
      std::string(content_bytes, static_cast<char>(key)));
  return std::make_shared<Chunk>(std::move(data));
}

// A stored item over `chunks` (one slice each), encoded as a table encodes
// it.
SampledItem MakeSample(uint64_t key,
                       std::vector<std::shared_ptr<Chunk>> chunks) {
  auto item = std::make_shared<TableItem>();
  item->item.set_key(key);
  item->item.set_table("t");
  item->item.set_priority(1.0);
  item->item.mutable_inserted_at()->set_seconds(123);
  auto* column = item->item.mutable_flat_trajectory()->add_columns();
  for (const auto& chunk : chunks) {
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(chunk->key());
    slice->set_length(1);
  }
  item->chunks = std::move(chunks);
  item->encoded_item = item->item.SerializeAsString();
  SampledItem sample;
  sample.ref = item;
  sample.probability = 0.25;
  sample.table_size = 4;
  sample.priority = 0.0;  // Explicit zero: must still override 1.0.
  sample.times_sampled = 3;
  sample.rate_limited = true;
  return sample;
}

SampleStreamResponse Parse(SampleResponseBytes& response) {
  grpc::ByteBuffer bytes = response.wire.Finish();
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string flat;
  for (const auto& slice : slices) {
    flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  SampleStreamResponse proto;
  EXPECT_TRUE(proto.ParseFromString(flat));
  return proto;
}

TEST(SampleResponseTest, InfoCarriesTheCurrentPriorityAndTimesSampled) {
  SampledItem sample = MakeSample(5, {MakeChunk(1, 10)});
  SampleInfo info;
  ASSERT_TRUE(info.ParseFromString(EncodeSampleInfo(sample)));
  EXPECT_EQ(info.item().key(), 5);
  EXPECT_EQ(info.item().table(), "t");
  EXPECT_EQ(info.item().priority(), 0.0);
  EXPECT_EQ(info.item().times_sampled(), 3);
  EXPECT_EQ(info.item().inserted_at().seconds(), 123);
  EXPECT_EQ(info.item().flat_trajectory().SerializeAsString(),
            sample.ref->item.flat_trajectory().SerializeAsString());
  EXPECT_EQ(info.probability(), 0.25);
  EXPECT_EQ(info.table_size(), 4);
  EXPECT_TRUE(info.rate_limited());
}

TEST(SampleResponseTest, SamplesBecomeEntriesAndSpanResponsesPastTheCap) {
  // Sample 1: two small chunks. Sample 2: a chunk large enough to be
  // borrowed, then a small one, with a cap that the large chunk passes.
  auto small_a = MakeChunk(1, 10);
  auto small_b = MakeChunk(2, 20);
  auto large = MakeChunk(3, 40 << 10);
  auto small_c = MakeChunk(4, 30);
  std::deque<SampleResponseBytes> responses;
  const int64_t cap = 20 << 10;
  AppendSample(MakeSample(1, {small_a, small_b}), cap, &responses);
  AppendSample(MakeSample(2, {large, small_c}), cap, &responses);
  ASSERT_EQ(responses.size(), 2);

  SampleStreamResponse first = Parse(responses[0]);
  ASSERT_EQ(first.entries_size(), 2);
  EXPECT_EQ(first.entries(0).info().item().key(), 1);
  ASSERT_EQ(first.entries(0).data_size(), 2);
  EXPECT_EQ(first.entries(0).data(0).SerializeAsString(),
            std::string(small_a->wire()));
  EXPECT_EQ(first.entries(0).data(1).SerializeAsString(),
            std::string(small_b->wire()));
  EXPECT_TRUE(first.entries(0).end_of_sequence());
  // The large chunk fills the first response; the small one goes on in a
  // second entry of the next.
  EXPECT_EQ(first.entries(1).info().item().key(), 2);
  ASSERT_EQ(first.entries(1).data_size(), 1);
  EXPECT_EQ(first.entries(1).data(0).data().tensors(0).tensor_content(),
            std::string(40 << 10, '\3'));
  EXPECT_EQ(first.entries(1).data(0).chunk_key(), 3);
  EXPECT_FALSE(first.entries(1).end_of_sequence());

  SampleStreamResponse second = Parse(responses[1]);
  ASSERT_EQ(second.entries_size(), 1);
  EXPECT_FALSE(second.entries(0).has_info());
  ASSERT_EQ(second.entries(0).data_size(), 1);
  EXPECT_EQ(second.entries(0).data(0).chunk_key(), 4);
  EXPECT_TRUE(second.entries(0).end_of_sequence());
}

TEST(SampleResponseTest, ChunkPiecesAreSentFromWhereTheChunkHoldsThem) {
  // A chunk received in pieces: 40 KiB ones are borrowed, the small last
  // one is copied.
  const std::string bytes =
      MakeChunk(7, 90 << 10)->ToProto().SerializeAsString();
  absl::Cord wire;
  for (size_t at = 0; at < bytes.size(); at += 40 << 10) {
    wire.Append(absl::MakeCordFromExternal(
        absl::string_view(bytes).substr(at, 40 << 10), [] {}));
  }
  auto chunk = Chunk::Parse(wire);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  std::deque<SampleResponseBytes> responses;
  AppendSample(MakeSample(1, {*chunk}), 4 << 20, &responses);
  ASSERT_EQ(responses.size(), 1);
  grpc::ByteBuffer buffer = responses[0].wire.Finish();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  int borrowed = 0;
  std::string flat;
  for (const grpc::Slice& slice : slices) {
    const char* begin = reinterpret_cast<const char*>(slice.begin());
    if (begin >= bytes.data() && begin < bytes.data() + bytes.size()) {
      EXPECT_EQ(slice.size(), 40 << 10);
      ++borrowed;
    }
    flat.append(begin, slice.size());
  }
  EXPECT_EQ(borrowed, 2);
  SampleStreamResponse proto;
  ASSERT_TRUE(proto.ParseFromString(flat));
  ASSERT_EQ(proto.entries_size(), 1);
  EXPECT_EQ(proto.entries(0).data(0).SerializeAsString(), bytes);
}

}  // namespace
}  // namespace deepmind::reverb
