#include "cc/wire/sample_response.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "cc/tensor/compression.h"
#include "gtest/gtest.h"
#include "reverb/cc/reverb_service.pb.h"
#include "tests/cc/test_util.h"

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

// The bytes of `bytes`, in one string.
std::string FlatBytes(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string flat;
  for (const auto& slice : slices) {
    flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return flat;
}

// The bytes of `response`, in one string.
std::string Flat(SampleResponseBytes& response) {
  return FlatBytes(response.wire.Finish());
}

SampleStreamResponse Parse(SampleResponseBytes& response) {
  SampleStreamResponse proto;
  EXPECT_TRUE(proto.ParseFromString(Flat(response)));
  return proto;
}

TEST(SampleResponseTest, StreamsThatAskGetTheRowsTheSampleReads) {
  // A chunk of four random rows of 12 KiB (stored uncompressed), of which
  // the item reads the third.
  Tensor rows;
  rows.dtype = tensorflow::DT_UINT8;
  rows.shape = {4, 12 << 10};
  rows.bytes.resize(48 << 10);
  uint32_t state = 1;
  for (char& c : rows.bytes) c = static_cast<char>((state *= 69069) >> 24);
  ChunkData data;
  data.set_chunk_key(9);
  data.set_data_tensors_len(1);
  data.mutable_sequence_range()->set_end(3);
  ASSERT_TRUE(
      CompressTensorAsProto(rows, data.mutable_data()->add_tensors()).ok());
  auto chunk = *Chunk::Parse(absl::Cord(data.SerializeAsString()));
  SampledItem sample = MakeSample(1, {chunk});
  auto item = std::make_shared<TableItem>(*sample.ref);
  item->item.mutable_flat_trajectory()
      ->mutable_columns(0)
      ->mutable_chunk_slices(0)
      ->set_offset(2);
  sample.ref = item;
  for (bool trim : {false, true}) {
    SCOPED_TRACE(trim);
    std::deque<SampleResponseBytes> responses;
    AppendSample(
        sample, 4 << 20, &responses, [](const Chunk&) { return std::string(); },
        trim);
    ASSERT_EQ(responses.size(), 1);
    const int64_t size = responses[0].size;
    SampleStreamResponse response = Parse(responses[0]);
    ASSERT_EQ(response.entries_size(), 1);
    ASSERT_EQ(response.entries(0).data_size(), 1);
    const ChunkData& sent = response.entries(0).data(0);
    EXPECT_EQ(sent.chunk_key(), 9);
    EXPECT_EQ(sent.first_row(), trim ? 2 : 0);
    auto tensor = DecompressTensorFromProto(sent.data().tensors(0));
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    EXPECT_EQ(tensor->bytes,
              trim ? rows.bytes.substr(24 << 10, 12 << 10) : rows.bytes);
    // The response's size counts the bytes sent.
    EXPECT_EQ(size,
              EncodeSampleInfo(sample).size() +
                  (trim ? sent.ByteSizeLong() : chunk->DataByteSizeLong()));
  }
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

TEST(SampleResponseTest, InfoOfEverySizeIsWrittenWhole) {
  // The info is written straight into the response after a length computed
  // apart: counts of one to several varint bytes, with and without
  // rate_limited, must come out as given.
  for (int64_t times_sampled : {0, 127, 128, 1 << 20, 2147483647}) {
    for (int64_t table_size : {int64_t{0}, int64_t{200}, int64_t{1} << 40}) {
      for (bool rate_limited : {false, true}) {
        SampledItem sample = MakeSample(9, {MakeChunk(1, 10)});
        sample.times_sampled = static_cast<int32_t>(times_sampled);
        sample.table_size = table_size;
        sample.rate_limited = rate_limited;
        SampleInfo encoded;
        ASSERT_TRUE(encoded.ParseFromString(EncodeSampleInfo(sample)));
        std::deque<SampleResponseBytes> responses;
        AppendSample(sample, 4 << 20, &responses);
        ASSERT_EQ(responses.size(), 1);
        SampleStreamResponse response = Parse(responses[0]);
        ASSERT_EQ(response.entries_size(), 1);
        const SampleInfo& info = response.entries(0).info();
        EXPECT_EQ(info.SerializeAsString(), encoded.SerializeAsString());
        EXPECT_EQ(info.item().times_sampled(), times_sampled);
        EXPECT_EQ(info.table_size(), table_size);
        EXPECT_EQ(info.rate_limited(), rate_limited);
        EXPECT_EQ(info.item().key(), 9);
        EXPECT_EQ(response.entries(0).data_size(), 1);
        EXPECT_TRUE(response.entries(0).end_of_sequence());
      }
    }
  }
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

TEST(SampleResponseTest, SamplesOfABatchAreWrittenAsOneByOne) {
  // Batches shorter and longer than the distance items are fetched ahead,
  // samples of one or two chunks, a cap that splits them over responses;
  // trimmed and lent chunks as AppendSample writes them.
  std::vector<SampledItem> samples;
  for (int i = 0; i < 40; ++i) {
    std::shared_ptr<Chunk> first = MakeChunk(i, 100 + 997 * i);
    if (i % 2 == 1) {  // Kept in a segment.
      auto kept = Chunk::Parse(first->wire(), absl::StrCat("p.w1/", i));
      ASSERT_TRUE(kept.ok()) << kept.status();
      first = *std::move(kept);
    }
    std::vector<std::shared_ptr<Chunk>> chunks = {first};
    if (i % 3 == 0) chunks.push_back(MakeChunk(1000 + i, 10));
    samples.push_back(MakeSample(i + 1, std::move(chunks)));
  }
  // Every other segment is lent; the others go as bytes.
  auto lend = [](const Chunk& chunk) {
    return chunk.key() % 4 == 1 ? absl::StrCat("p.s1/", chunk.key())
                                : std::string();
  };
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{40}}) {
    for (const bool trim : {false, true}) {
      SCOPED_TRACE(absl::StrCat(n, " samples, trim ", trim));
      const auto batch = absl::MakeConstSpan(samples).subspan(0, n);
      std::deque<SampleResponseBytes> one_by_one, together;
      for (const SampledItem& sample : batch) {
        AppendSample(sample, 64 << 10, &one_by_one, lend, trim);
      }
      AppendSamples(batch, 64 << 10, &together, lend, trim);
      ASSERT_EQ(together.size(), one_by_one.size());
      for (size_t r = 0; r < together.size(); ++r) {
        EXPECT_EQ(together[r].size, one_by_one[r].size);
        EXPECT_EQ(Flat(together[r]), Flat(one_by_one[r]));
      }
    }
  }
}

TEST(SampleResponseTest, ChunkPiecesAreSentFromWhereTheChunkHoldsThem) {
  // A chunk received in pieces: 40 KiB ones are borrowed, the small last
  // one is copied.
  const std::string bytes =
      MakeChunk(7, 90 << 10)->ToProto().SerializeAsString();
  const absl::Cord wire = testing::InPieces(bytes, 40 << 10);
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

// What DecodeSampleResponse made of `bytes`, and what it left apart.
struct Decoded {
  absl::Status status;
  SampleStreamResponse response;
  std::vector<std::pair<const ChunkData*, std::vector<absl::Cord>>> apart;
};

// `bytes`: a grpc::ByteBuffer as received, or an absl::Cord (a segment's).
template <typename Bytes>
Decoded Decode(const Bytes& bytes) {
  Decoded decoded;
  decoded.status = DecodeSampleResponse(
      bytes, &decoded.response,
      [&decoded](const ChunkData* chunk, std::vector<absl::Cord> contents) {
        decoded.apart.emplace_back(chunk, std::move(contents));
      });
  return decoded;
}

// `wire` as gRPC would receive it: in slices of `slice_bytes`, referring to
// `wire`'s memory.
grpc::ByteBuffer Received(const std::string& wire, size_t slice_bytes) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size(); at += slice_bytes) {
    const size_t size = std::min(slice_bytes, wire.size() - at);
    slices.emplace_back(const_cast<char*>(wire.data()) + at, size,
                        grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(SampleResponseTest, DecodeLeavesLargeContentsWhereTheyWereReceived) {
  // Sample 1: two small chunks; sample 2: a large one and a small one.
  std::deque<SampleResponseBytes> responses;
  AppendSample(MakeSample(1, {MakeChunk(1, 10), MakeChunk(2, 20)}), 4 << 20,
               &responses);
  AppendSample(MakeSample(2, {MakeChunk(3, 40 << 10), MakeChunk(4, 30)}),
               4 << 20, &responses);
  ASSERT_EQ(responses.size(), 1);
  const std::string wire = Flat(responses[0]);
  SampleStreamResponse expected;
  ASSERT_TRUE(expected.ParseFromString(wire));

  // Received in slices of these sizes; 0: in a cord over `wire` (a
  // segment's bytes).
  for (size_t slice_bytes :
       {size_t{1} << 20, size_t{4096}, size_t{700}, size_t{0}}) {
    SCOPED_TRACE(slice_bytes);
    Decoded decoded = slice_bytes == 0
                          ? Decode(absl::MakeCordFromExternal(wire, [] {}))
                          : Decode(Received(wire, slice_bytes));
    ASSERT_TRUE(decoded.status.ok()) << decoded.status;
    // Only the large chunk is apart: its tensor without its content, which
    // lies in the received bytes (in one piece when it came in one slice).
    ASSERT_EQ(decoded.apart.size(), 1);
    const ChunkData* apart = decoded.apart[0].first;
    EXPECT_EQ(apart, &decoded.response.entries(1).data(0));
    EXPECT_TRUE(apart->data().tensors(0).tensor_content().empty());
    ASSERT_EQ(decoded.apart[0].second.size(), 1);
    const absl::Cord& content = decoded.apart[0].second[0];
    EXPECT_EQ(std::string(content), std::string(40 << 10, '\3'));
    for (absl::string_view piece : content.Chunks()) {
      EXPECT_GE(piece.data(), wire.data());
      EXPECT_LE(piece.data() + piece.size(), wire.data() + wire.size());
    }
    // With the content put back, everything is as protobuf parses it.
    SampleStreamResponse whole = decoded.response;
    whole.mutable_entries(1)
        ->mutable_data(0)
        ->mutable_data()
        ->mutable_tensors(0)
        ->set_tensor_content(std::string(content));
    EXPECT_EQ(whole.SerializeAsString(), expected.SerializeAsString());
    EXPECT_EQ(decoded.response.entries(1).info().item().priority(), 0.0);
    EXPECT_EQ(decoded.response.entries(1).info().item().times_sampled(), 3);
  }
}

TEST(SampleResponseTest, DecodeParsesAResponseOfSmallSamplesAsProtobuf) {
  std::deque<SampleResponseBytes> responses;
  for (uint64_t key = 1; key <= 20; ++key) {
    AppendSample(MakeSample(key, {MakeChunk(key, 100 * key)}), 4 << 20,
                 &responses);
  }
  ASSERT_EQ(responses.size(), 1);
  const std::string wire = Flat(responses[0]);
  SampleStreamResponse expected;
  ASSERT_TRUE(expected.ParseFromString(wire));
  for (const Decoded& decoded :
       {Decode(Received(wire, 700)), Decode(absl::Cord(wire))}) {
    ASSERT_TRUE(decoded.status.ok()) << decoded.status;
    EXPECT_TRUE(decoded.apart.empty());
    EXPECT_EQ(decoded.response.SerializeAsString(),
              expected.SerializeAsString());
  }
}

TEST(SampleResponseTest, ASharedResponseIsAMessageNamingItsSegment) {
  const grpc::ByteBuffer bytes = SharedResponseBytes("P.s3/17", 5 << 20);
  const std::string flat = FlatBytes(bytes);
  SampleStreamResponse proto;
  ASSERT_TRUE(proto.ParseFromString(flat));
  EXPECT_EQ(proto.entries_size(), 0);
  EXPECT_EQ(proto.shared_response().segment(), "P.s3/17");
  EXPECT_EQ(proto.shared_response().size(), 5 << 20);
  // Our clients decode it as any small response.
  Decoded decoded = Decode(bytes);
  ASSERT_TRUE(decoded.status.ok()) << decoded.status;
  EXPECT_EQ(decoded.response.SerializeAsString(), flat);
}

TEST(SampleResponseTest, DecodeKeepsEveryFieldOfAnEntryWithALargeChunk) {
  // An entry with shared-memory chunks and large chunks among its other
  // fields, serialized by protobuf.
  SampleStreamResponse response;
  auto* entry = response.add_entries();
  entry->add_shared_data()->set_segment("a");
  *entry->add_data() = MakeChunk(1, 20 << 10)->ToProto();
  *entry->add_data() = MakeChunk(2, 5)->ToProto();
  *entry->add_data() = MakeChunk(3, 30 << 10)->ToProto();
  entry->mutable_info()->set_probability(0.5);
  entry->add_shared_data()->set_segment("b");
  entry->set_end_of_sequence(true);
  const std::string wire = response.SerializeAsString();
  Decoded decoded = Decode(Received(wire, 1000));
  ASSERT_TRUE(decoded.status.ok()) << decoded.status;
  ASSERT_EQ(decoded.apart.size(), 2);
  const auto& got = decoded.response.entries(0);
  ASSERT_EQ(got.data_size(), 3);
  EXPECT_EQ(decoded.apart[0].first, &got.data(0));
  EXPECT_EQ(decoded.apart[1].first, &got.data(2));
  EXPECT_EQ(got.data(1).SerializeAsString(),
            entry->data(1).SerializeAsString());
  EXPECT_EQ(got.data(2).chunk_key(), 3);
  EXPECT_EQ(std::string(decoded.apart[1].second[0]),
            std::string(30 << 10, '\3'));
  ASSERT_EQ(got.shared_data_size(), 2);
  EXPECT_EQ(got.shared_data(1).segment(), "b");
  EXPECT_EQ(got.info().probability(), 0.5);
  EXPECT_TRUE(got.end_of_sequence());
}

TEST(SampleResponseTest, DecodeRefusesWhatProtobufRefuses) {
  SampleStreamResponse response;
  *response.add_entries()->add_data() = MakeChunk(1, 20 << 10)->ToProto();
  const std::string wire = response.SerializeAsString();
  // Cut short; a length past the end in the chunk's header; an entry whose
  // chunk field is truncated.
  std::string bad_length = wire;
  bad_length[bad_length.size() - (20 << 10) - 3] = '\x7f';
  for (const std::string& bad : {wire.substr(0, wire.size() - 1), bad_length,
                                 std::string("\x0a\x05\x12\x03\xff\xff\xff")}) {
    SampleStreamResponse expected;
    const bool parses = expected.ParseFromString(bad);
    const Decoded decoded = Decode(Received(bad, 700));
    if (parses) {
      EXPECT_TRUE(decoded.status.ok()) << decoded.status;
    } else {
      EXPECT_EQ(decoded.status,
                absl::InvalidArgumentError("Malformed SampleStreamResponse."));
    }
  }
  EXPECT_EQ(Decode(Received(wire.substr(0, wire.size() - 1), 700)).status,
            absl::InvalidArgumentError("Malformed SampleStreamResponse."));
}

}  // namespace
}  // namespace deepmind::reverb
