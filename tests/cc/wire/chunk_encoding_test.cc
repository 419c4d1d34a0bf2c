#include "cc/wire/chunk_encoding.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "cc/core/chunk.h"
#include "cc/support/varint.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "reverb/cc/reverb_service.pb.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::RandomBytes;

// Field numbers of the messages the tests wrap chunks in.
constexpr int kInsertChunksField = 1;  // InsertStreamRequest.chunks
constexpr int kEntryInfoField = 1;     // SampleEntry.info
constexpr int kEntryDataField = 2;     // SampleEntry.data
constexpr int kEntryEndField = 3;      // SampleEntry.end_of_sequence

tensorflow::TensorProto TensorProto(size_t bytes, uint32_t seed) {
  tensorflow::TensorProto tensor;
  tensor.set_dtype(tensorflow::DT_UINT8);
  tensor.mutable_tensor_shape()->add_dim()->set_size(
      static_cast<int64_t>(bytes));
  tensor.set_version_number(static_cast<int32_t>(seed));
  tensor.set_tensor_content(RandomBytes(bytes, seed));
  return tensor;
}

// A chunk with every field the encoder knows set, and `tensors`.
ChunkData MakeChunk(uint64_t key,
                    std::vector<tensorflow::TensorProto> tensors) {
  ChunkData chunk;
  chunk.set_chunk_key(key);
  chunk.mutable_sequence_range()->set_episode_id(11);
  chunk.mutable_sequence_range()->set_start(2);
  chunk.mutable_sequence_range()->set_end(4);
  chunk.mutable_sequence_range()->set_sparse(true);
  chunk.set_delta_encoded(true);
  chunk.set_data_tensors_len(static_cast<int32_t>(tensors.size()));
  chunk.set_data_uncompressed_size(12345);
  for (auto& tensor : tensors) *chunk.mutable_data()->add_tensors() = tensor;
  return chunk;
}

std::vector<grpc::Slice> SlicesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  return slices;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::string bytes;
  for (const grpc::Slice& slice : SlicesOf(buffer)) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// A slice of `buffer` that is `content` itself (not a copy of it).
bool Borrows(const grpc::ByteBuffer& buffer, absl::string_view content) {
  for (const grpc::Slice& slice : SlicesOf(buffer)) {
    if (reinterpret_cast<const char*>(slice.begin()) == content.data() &&
        slice.size() == content.size()) {
      return true;
    }
  }
  return false;
}

// An owner for PutChunk and PutBytes that counts its calls.
struct CountingOwner {
  std::shared_ptr<const void> Get() {
    ++calls;
    return held;
  }
  std::shared_ptr<const void> held = std::make_shared<int>(0);
  int calls = 0;
};

TEST(ChunkEncodingTest, LengthDelimitedSizeIsWhatProtobufCounts) {
  EXPECT_EQ(LengthDelimitedSize(0), 2);  // A tag, a zero length.
  for (size_t size : {size_t{1}, size_t{127}, size_t{128}, size_t{16383},
                      size_t{16384}, size_t{3} << 20}) {
    tensorflow::TensorProto tensor;  // tensor_content is field 4.
    tensor.set_tensor_content(std::string(size, 'x'));
    EXPECT_EQ(LengthDelimitedSize(size), tensor.ByteSizeLong()) << size;
  }
}

TEST(ChunkEncodingTest, FieldsAndMessagesAreProtobufsBytes) {
  SampleStreamResponse::SampleEntry entry;
  entry.mutable_info()->mutable_item()->set_key(300);
  entry.mutable_info()->set_table_size(1 << 20);
  entry.set_end_of_sequence(true);

  WireBuffer wire;
  const size_t size = entry.info().ByteSizeLong();
  wire.PutFieldHeader(kEntryInfoField, size);
  wire.PutMessage(entry.info(), size);
  wire.PutVarintField(kEntryEndField, 1);
  EXPECT_EQ(Flatten(wire.Finish()), entry.SerializeAsString());

  // Varints of several bytes.
  ChunkData chunk;
  chunk.set_data_tensors_len(300);
  WireBuffer varints;
  varints.PutVarintField(6, 300);  // ChunkData.data_tensors_len
  EXPECT_EQ(Flatten(varints.Finish()), chunk.SerializeAsString());
}

TEST(ChunkEncodingTest, SmallChunksAreProtobufsOwnBytes) {
  InsertStreamRequest request;
  *request.add_chunks() =
      MakeChunk(1, {TensorProto(100, 1), TensorProto(0, 2)});
  *request.add_chunks() = MakeChunk(2, {});
  *request.add_chunks() = MakeChunk(3, {TensorProto(kMinBorrowedBytes - 1, 3)});
  CountingOwner owner;
  WireBuffer wire;
  for (const ChunkData& chunk : request.chunks()) {
    wire.PutChunk(kInsertChunksField, chunk, chunk.ByteSizeLong(),
                  [&] { return owner.Get(); });
  }
  EXPECT_EQ(Flatten(wire.Finish()), request.SerializeAsString());
  EXPECT_EQ(owner.calls, 0);
}

TEST(ChunkEncodingTest, LargeContentsAreBorrowedAndParseAsTheSameChunk) {
  auto chunk = std::make_shared<ChunkData>(
      MakeChunk(7, {TensorProto(kMinBorrowedBytes, 1), TensorProto(10, 2),
                    TensorProto(200 << 10, 3)}));
  CountingOwner owner;
  owner.held = chunk;
  const size_t size = chunk->ByteSizeLong();
  WireBuffer wire;
  wire.PutChunk(kEntryDataField, *chunk, size, [&] { return owner.Get(); });
  wire.PutVarintField(kEntryEndField, 1);
  grpc::ByteBuffer buffer = wire.Finish();

  const std::string bytes = Flatten(buffer);
  EXPECT_EQ(bytes.size(), LengthDelimitedSize(size) + 2);
  SampleStreamResponse::SampleEntry parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.data_size(), 1);
  EXPECT_TRUE(MessageDifferencer::Equals(parsed.data(0), *chunk));
  EXPECT_TRUE(parsed.end_of_sequence());

  EXPECT_TRUE(Borrows(buffer, chunk->data().tensors(0).tensor_content()));
  EXPECT_FALSE(Borrows(buffer, chunk->data().tensors(1).tensor_content()));
  EXPECT_TRUE(Borrows(buffer, chunk->data().tensors(2).tensor_content()));
  EXPECT_EQ(owner.calls, 2);

  // The slices hold the chunk until gRPC lets go of them.
  std::weak_ptr<const ChunkData> weak = chunk;
  chunk.reset();
  owner.held.reset();
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ(std::string(Flatten(buffer)), bytes);
  buffer.Clear();
  EXPECT_TRUE(weak.expired());
}

TEST(ChunkEncodingTest, ChunksWithFieldsTheEncoderDoesNotKnowGoWhole) {
  // Unknown fields of the chunk, and a tensor field the encoder does not
  // write itself (insert_request_test.cc has a deprecated chunk field).
  ChunkData unknown = MakeChunk(1, {TensorProto(64 << 10, 1)});
  std::string with_unknown = unknown.SerializeAsString();
  with_unknown += std::string("\x78\x05", 2);  // Field 15, varint 5.
  ASSERT_TRUE(unknown.ParseFromString(with_unknown));
  tensorflow::TensorProto odd_tensor = TensorProto(64 << 10, 4);
  odd_tensor.add_half_val(1);
  ChunkData odd = MakeChunk(3, {odd_tensor});

  for (const ChunkData* chunk : {&unknown, &odd}) {
    InsertStreamRequest request;
    *request.add_chunks() = *chunk;
    CountingOwner owner;
    WireBuffer wire;
    wire.PutChunk(kInsertChunksField, *chunk, chunk->ByteSizeLong(),
                  [&] { return owner.Get(); });
    EXPECT_EQ(Flatten(wire.Finish()), request.SerializeAsString())
        << chunk->chunk_key();
    EXPECT_EQ(owner.calls, 0);
  }
}

TEST(ChunkEncodingTest, BytesBeforeAContentAndTheContentAreTheChunk) {
  // Sizes around the varint steps of the content's, the tensor's and the
  // data's lengths.
  for (const size_t size :
       {size_t{1}, size_t{100}, size_t{127}, size_t{128}, size_t{16370},
        size_t{16384}, size_t{(1 << 21) + 3}}) {
    SCOPED_TRACE(size);
    const ChunkData chunk = MakeChunk(7, {TensorProto(size, 3)});
    ChunkData header = chunk;
    header.mutable_data()->mutable_tensors(0)->clear_tensor_content();
    const std::string& content = chunk.data().tensors(0).tensor_content();
    const std::string bytes =
        ChunkBytesBeforeContent(header, content.size()) + content;
    EXPECT_EQ(bytes.size(), chunk.ByteSizeLong());
    ChunkData parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    EXPECT_TRUE(MessageDifferencer::Equals(parsed, chunk));
    // The layout PutChunk gives a borrowed content.
    if (size >= kMinBorrowedBytes) {
      WireBuffer wire;
      wire.PutChunk(kInsertChunksField, chunk, chunk.ByteSizeLong(),
                    [] { return std::shared_ptr<const void>(); });
      std::string field;
      PutTag(kInsertChunksField, kLengthDelimited, &field);
      PutVarint32(static_cast<uint32_t>(bytes.size()), &field);
      EXPECT_EQ(Flatten(wire.Finish()), field + bytes);
    }
  }
}

TEST(ChunkEncodingTest, PutBytesBorrowsTheLargePiecesOfACord) {
  const ChunkData chunk = MakeChunk(5, {TensorProto(100 << 10, 1)});
  const std::string serialized = chunk.SerializeAsString();
  // Pieces of 100 bytes (copied), kMinBorrowedBytes (borrowed), the rest.
  const absl::string_view all(serialized);
  const std::vector<absl::string_view> pieces = {
      all.substr(0, 100), all.substr(100, kMinBorrowedBytes),
      all.substr(100 + kMinBorrowedBytes)};
  absl::Cord cord;
  for (absl::string_view piece : pieces) {
    cord.Append(absl::MakeCordFromExternal(piece, [] {}));
  }
  CountingOwner owner;
  WireBuffer wire;
  wire.PutBytes(kEntryDataField, cord, [&] { return owner.Get(); });
  const grpc::ByteBuffer buffer = wire.Finish();

  SampleStreamResponse::SampleEntry parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  ASSERT_EQ(parsed.data_size(), 1);
  EXPECT_TRUE(MessageDifferencer::Equals(parsed.data(0), chunk));
  EXPECT_FALSE(Borrows(buffer, pieces[0]));
  EXPECT_TRUE(Borrows(buffer, pieces[1]));
  EXPECT_TRUE(Borrows(buffer, pieces[2]));
  EXPECT_EQ(owner.calls, 2);
}

TEST(ChunkEncodingTest, PendingBytesKeepTheirPlace) {
  const ChunkData chunk = MakeChunk(5, {TensorProto(40 << 10, 1)});
  const size_t size = chunk.ByteSizeLong();
  WireBuffer wire;
  SampleInfo info;
  info.set_probability(0.5);
  const std::string info_bytes = info.SerializeAsString();
  wire.PutFieldHeader(kEntryInfoField, info_bytes.size());
  wire.pending()->append(info_bytes);
  wire.PutChunk(kEntryDataField, chunk, size, [] { return nullptr; });
  wire.pending()->append("\x18\x01");  // end_of_sequence: true.
  SampleStreamResponse::SampleEntry parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(wire.Finish())));
  EXPECT_EQ(parsed.info().probability(), 0.5);
  ASSERT_EQ(parsed.data_size(), 1);
  EXPECT_TRUE(MessageDifferencer::Equals(parsed.data(0), chunk));
  EXPECT_TRUE(parsed.end_of_sequence());
}

TEST(ChunkEncodingTest, LargeMessagesGoInSlicesInsteadOfGrowing) {
  // 1 MiB of small entries (copied, not borrowed): the bytes are the same,
  // in slices of about kSliceBytes (the first as the string's growth
  // rounds it) rather than one string grown (and copied) up to 1 MiB.
  const ChunkData chunk = MakeChunk(5, {TensorProto(1000, 1)});
  const std::string serialized = chunk.SerializeAsString();
  const absl::Cord cord(serialized);
  WireBuffer wire;
  std::string expected;
  while (expected.size() < (1 << 20)) {
    wire.PutBytes(kEntryDataField, cord, [] { return nullptr; });
    wire.PutVarintField(kEntryEndField, 1);
    PutTag(kEntryDataField, kLengthDelimited, &expected);
    PutVarint32(static_cast<uint32_t>(serialized.size()), &expected);
    expected += serialized;
    expected += "\x18\x01";
  }
  const grpc::ByteBuffer buffer = wire.Finish();
  EXPECT_EQ(Flatten(buffer), expected);
  const std::vector<grpc::Slice> slices = SlicesOf(buffer);
  ASSERT_GE(slices.size(), (1u << 20) / WireBuffer::kSliceBytes);
  for (size_t i = 0; i + 1 < slices.size(); ++i) {
    EXPECT_GE(slices[i].size(), WireBuffer::kSliceBytes / 2);
    EXPECT_LT(slices[i].size(), 2 * WireBuffer::kSliceBytes);
  }
}

TEST(ChunkEncodingTest, FinishLeavesTheBufferEmpty) {
  const ChunkData chunk = MakeChunk(5, {TensorProto(40 << 10, 1)});
  WireBuffer wire;
  wire.PutChunk(kInsertChunksField, chunk, chunk.ByteSizeLong(),
                [] { return nullptr; });
  EXPECT_GT(wire.Finish().Length(), 40u << 10);
  EXPECT_TRUE(wire.pending()->empty());
  EXPECT_EQ(wire.Finish().Length(), 0u);
  // And is used again from the start.
  wire.PutVarintField(kEntryEndField, 1);
  EXPECT_EQ(Flatten(wire.Finish()), std::string("\x18\x01"));
}

TEST(ChunkEncodingTest, EncodedChunksDecodeAsTheSameChunk) {
  const ChunkData chunk =
      MakeChunk(9, {TensorProto(20, 1), TensorProto(kMinBorrowedBytes, 2)});
  WireBuffer wire;
  wire.PutChunk(kInsertChunksField, chunk, chunk.ByteSizeLong(),
                [] { return nullptr; });
  const std::string bytes = Flatten(wire.Finish());
  // Without the field header: the chunk's own bytes.
  auto decoded = Chunk::Parse(absl::Cord(
      absl::string_view(bytes).substr(bytes.size() - chunk.ByteSizeLong())));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ((*decoded)->key(), 9);
  EXPECT_EQ((*decoded)->episode_id(), 11);
  EXPECT_EQ((*decoded)->num_rows(), 3);
  EXPECT_EQ((*decoded)->num_columns(), 2);
  EXPECT_EQ((*decoded)->uncompressed_data_size(), 12345);
  EXPECT_TRUE(MessageDifferencer::Equals((*decoded)->ToProto(), chunk));
}

TEST(ChunkEncodingTest, DamagedChunkBytesDecodeOnlyIfProtobufParsesThem) {
  // Random byte changes and truncations of an encoded chunk: Chunk::Parse
  // refuses, with INVALID_ARGUMENT, whatever protobuf does not parse as a
  // ChunkData, and what it accepts is protobuf's chunk; none may crash.
  // (It may refuse a little more: tags longer than 32 bits, which protobuf
  // truncates.)
  const ChunkData chunk =
      MakeChunk(9, {TensorProto(30, 1), TensorProto(kMinBorrowedBytes, 2),
                    TensorProto(5, 3)});
  WireBuffer wire;
  wire.PutChunk(kInsertChunksField, chunk, chunk.ByteSizeLong(),
                [] { return nullptr; });
  const std::string encoded = Flatten(wire.Finish());
  const std::string bytes =
      encoded.substr(encoded.size() - chunk.ByteSizeLong());
  // Damage goes in the fields around the large content.
  const size_t content_at =
      bytes.find(chunk.data().tensors(1).tensor_content());
  ASSERT_NE(content_at, std::string::npos);
  std::mt19937 random(3);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string damaged = bytes;
    for (int c = 1 + static_cast<int>(random() % 3); c > 0; --c) {
      size_t at = random() % (bytes.size() - kMinBorrowedBytes);
      if (at >= content_at) at += kMinBorrowedBytes;
      damaged[at] = static_cast<char>(random());
    }
    if (i % 4 == 0) damaged.resize(random() % damaged.size());
    auto decoded = Chunk::Parse(absl::Cord(damaged));
    if (!decoded.ok()) {
      ++refused;
      EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++accepted;
    ChunkData proto;
    ASSERT_TRUE(proto.ParseFromString(damaged))
        << "accepted what protobuf refuses, damage " << i;
    // The header as protobuf reads it (of fields given twice, the last).
    const Chunk& c = **decoded;
    EXPECT_EQ(c.key(), proto.chunk_key()) << i;
    EXPECT_EQ(c.episode_id(), proto.sequence_range().episode_id()) << i;
    EXPECT_EQ(c.num_columns(), proto.data_tensors_len() > 0
                                   ? proto.data_tensors_len()
                                   : proto.data().tensors_size())
        << i;
    EXPECT_EQ(c.uncompressed_data_size(),
              std::max<int64_t>(1, proto.data_uncompressed_size()))
        << i;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace deepmind::reverb
