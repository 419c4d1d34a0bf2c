#include "cc/wire/insert_request.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "cc/core/chunk.h"
#include "cc/support/varint.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

tensorflow::TensorProto Tensor(size_t bytes, uint32_t seed) {
  tensorflow::TensorProto tensor;
  tensor.set_dtype(tensorflow::DT_UINT8);
  tensor.mutable_tensor_shape()->add_dim()->set_size(1);
  tensor.mutable_tensor_shape()->add_dim()->set_size(
      static_cast<int64_t>(bytes));
  tensor.set_tensor_content(RandomBytes(bytes, seed));
  return tensor;
}

std::shared_ptr<const ChunkData> Chunk(
    uint64_t key, std::vector<tensorflow::TensorProto> tensors) {
  auto chunk = std::make_shared<ChunkData>();
  chunk->set_chunk_key(key);
  chunk->mutable_sequence_range()->set_episode_id(7);
  chunk->mutable_sequence_range()->set_start(3);
  chunk->mutable_sequence_range()->set_end(3);
  chunk->set_delta_encoded(key % 2 == 0);
  chunk->set_data_tensors_len(static_cast<int32_t>(tensors.size()));
  int64_t uncompressed = 0;
  for (auto& tensor : tensors) {
    uncompressed += static_cast<int64_t>(tensor.tensor_content().size());
    *chunk->mutable_data()->add_tensors() = std::move(tensor);
  }
  chunk->set_data_uncompressed_size(uncompressed);
  return chunk;
}

InsertStreamRequest ItemsAndKeys() {
  InsertStreamRequest request;
  PrioritizedItem* item = request.add_items();
  item->set_key(99);
  item->set_table("table");
  item->set_priority(1.5);
  auto* slice =
      item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(1);
  slice->set_length(1);
  request.add_keep_chunk_keys(1);
  request.add_keep_chunk_keys(4);
  return request;
}

std::vector<grpc::Slice> SlicesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  return slices;
}

InsertStreamRequest Parse(const grpc::ByteBuffer& buffer) {
  std::string bytes;
  for (const grpc::Slice& slice : SlicesOf(buffer)) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  InsertStreamRequest request;
  EXPECT_TRUE(request.ParseFromString(bytes));
  return request;
}

// A slice of `buffer` that is `content` itself (not a copy of it).
bool Borrows(const grpc::ByteBuffer& buffer, const std::string& content) {
  for (const grpc::Slice& slice : SlicesOf(buffer)) {
    if (reinterpret_cast<const char*>(slice.begin()) == content.data() &&
        slice.size() == content.size()) {
      return true;
    }
  }
  return false;
}

TEST(InsertRequestTest, ParsesAsTheRequestWithItsChunks) {
  tensorflow::TensorProto with_other_field = Tensor(kMinBorrowedBytes, 5);
  with_other_field.add_half_val(1);  // Unknown to the encoder.
  auto with_deprecated =
      std::make_shared<ChunkData>(*Chunk(6, {Tensor(kMinBorrowedBytes, 6)}));
  *with_deprecated->add_deprecated_data() = Tensor(10, 7);
  const std::vector<std::shared_ptr<const ChunkData>> chunks = {
      Chunk(1, {Tensor(100 << 10, 1)}),  // borrowed
      Chunk(2, {Tensor(100, 2)}),        // small
      Chunk(3, {Tensor(20, 3), Tensor(kMinBorrowedBytes, 4),
                Tensor(kMinBorrowedBytes - 1, 8)}),  // mixed
      Chunk(4, {with_other_field}),                  // whole
      with_deprecated,                               // whole
      Chunk(5, {}),                                  // no tensors
  };
  const InsertStreamRequest request = ItemsAndKeys();
  const grpc::ByteBuffer buffer = EncodeInsertRequest(request, chunks);

  InsertStreamRequest expected = request;
  expected.clear_chunks();
  for (const auto& chunk : chunks) *expected.add_chunks() = *chunk;
  // Chunks come first on the wire, as protobuf writes them.
  InsertStreamRequest parsed = Parse(buffer);
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(parsed, expected))
      << parsed.ShortDebugString().substr(0, 2000);

  EXPECT_TRUE(Borrows(buffer, chunks[0]->data().tensors(0).tensor_content()));
  EXPECT_TRUE(Borrows(buffer, chunks[2]->data().tensors(1).tensor_content()));
  EXPECT_FALSE(Borrows(buffer, chunks[2]->data().tensors(2).tensor_content()));
  EXPECT_FALSE(Borrows(buffer, chunks[3]->data().tensors(0).tensor_content()));
  EXPECT_FALSE(Borrows(buffer, chunks[4]->data().tensors(0).tensor_content()));
}

TEST(InsertRequestTest, ChunksGivenAsTheirBytesFollowTheOthers) {
  // A writer's chunk built in shared memory is its wire bytes (a cord over
  // the segment): they are borrowed, and parse as the chunk.
  const auto proto = Chunk(1, {Tensor(20, 1)});
  const auto built = Chunk(2, {Tensor(100 << 10, 2)});
  const std::string serialized = built->SerializeAsString();
  // The bytes in pieces, as a mapping is not: the large one is borrowed.
  const size_t head = serialized.size() - (64 << 10);
  absl::Cord bytes(serialized.substr(0, head));
  const absl::string_view tail = absl::string_view(serialized).substr(head);
  bytes.Append(absl::MakeCordFromExternal(tail, [] {}));
  const InsertStreamRequest request = ItemsAndKeys();
  const grpc::ByteBuffer buffer =
      EncodeInsertRequest(request, {proto}, {}, {bytes});

  InsertStreamRequest expected = request;
  *expected.add_chunks() = *proto;
  *expected.add_chunks() = *built;
  const InsertStreamRequest parsed = Parse(buffer);
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(parsed, expected))
      << parsed.ShortDebugString().substr(0, 2000);
  bool borrowed = false;
  for (const grpc::Slice& slice : SlicesOf(buffer)) {
    borrowed |= reinterpret_cast<const char*>(slice.begin()) == tail.data();
  }
  EXPECT_TRUE(borrowed);
}

TEST(InsertRequestTest, BufferKeepsBorrowedChunksAlive) {
  std::weak_ptr<const ChunkData> weak;
  std::unique_ptr<grpc::ByteBuffer> buffer;
  {
    auto chunk = Chunk(1, {Tensor(64 << 10, 1)});
    weak = chunk;
    buffer = std::make_unique<grpc::ByteBuffer>(
        EncodeInsertRequest(InsertStreamRequest(), {chunk}));
  }
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ(Parse(*buffer).chunks(0).data().tensors(0).tensor_content(),
            weak.lock()->data().tensors(0).tensor_content());
  buffer.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(InsertRequestTest, RequestWithoutChunks) {
  const InsertStreamRequest request = ItemsAndKeys();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      Parse(EncodeInsertRequest(request, {})), request));
}

TEST(InsertRequestTest, ChunksComeFirstAsProtobufWritesThem) {
  // Small chunks (nothing borrowed): the bytes are protobuf's own.
  const std::vector<std::shared_ptr<const ChunkData>> chunks = {
      Chunk(1, {Tensor(100, 1)}), Chunk(2, {Tensor(20, 2), Tensor(30, 3)})};
  InsertStreamRequest expected = ItemsAndKeys();
  for (const auto& chunk : chunks) *expected.add_chunks() = *chunk;
  std::string bytes;
  for (const grpc::Slice& slice :
       SlicesOf(EncodeInsertRequest(ItemsAndKeys(), chunks))) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  EXPECT_EQ(bytes, expected.SerializeAsString());
}

TEST(InsertRequestTest, DecodingReplacesWhatTheRequestHeld) {
  DecodedInsertRequest decoded;
  const grpc::ByteBuffer first =
      EncodeInsertRequest(ItemsAndKeys(), {Chunk(1, {Tensor(10, 1)})});
  ASSERT_TRUE(DecodeInsertRequest(first, &decoded).ok());
  ASSERT_EQ(decoded.chunks.size(), 1);
  InsertStreamRequest keys_only;
  keys_only.add_keep_chunk_keys(9);
  ASSERT_TRUE(
      DecodeInsertRequest(EncodeInsertRequest(keys_only, {}), &decoded).ok());
  EXPECT_TRUE(decoded.chunks.empty());
  EXPECT_TRUE(decoded.items.empty());
  EXPECT_EQ(decoded.keep_chunk_keys, std::vector<uint64_t>({9}));
}

// The bytes of `message` as a ByteBuffer of slices of (at most) `piece`
// bytes, as gRPC hands over a message received in frames.
grpc::ByteBuffer InPieces(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    slices.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(InsertRequestTest, DecodesWhatItEncodes) {
  const std::vector<std::shared_ptr<const ChunkData>> chunks = {
      Chunk(1, {Tensor(100 << 10, 1)}),
      Chunk(2, {Tensor(100, 2), Tensor(20, 3)}),
  };
  const InsertStreamRequest request = ItemsAndKeys();
  DecodedInsertRequest decoded;
  ASSERT_TRUE(
      DecodeInsertRequest(EncodeInsertRequest(request, chunks), &decoded).ok());

  ASSERT_EQ(decoded.chunks.size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(decoded.chunks[i]->key(), chunks[i]->chunk_key());
    EXPECT_EQ(decoded.chunks[i]->num_columns(),
              chunks[i]->data().tensors_size());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        decoded.chunks[i]->ToProto(), *chunks[i]));
  }
  ASSERT_EQ(decoded.items.size(), 1);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      decoded.items[0], request.items(0)));
  EXPECT_EQ(decoded.keep_chunk_keys, std::vector<uint64_t>({1, 4}));
}

TEST(InsertRequestTest, LargeChunksKeepTheReceivedBytesSmallOnesACopy) {
  InsertStreamRequest request;
  *request.add_chunks() = *Chunk(1, {Tensor(200 << 10, 1)});
  *request.add_chunks() = *Chunk(2, {Tensor(100, 2)});
  const std::string bytes = request.SerializeAsString();
  // Slices that refer to `bytes` (grpc::Slice's STATIC_SLICE constructor).
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += 32 << 10) {
    slices.emplace_back(
        grpc_slice_from_static_buffer(
            bytes.data() + at, std::min<size_t>(32 << 10, bytes.size() - at)),
        grpc::Slice::STEAL_REF);
  }
  DecodedInsertRequest decoded;
  ASSERT_TRUE(DecodeInsertRequest(
                  grpc::ByteBuffer(slices.data(), slices.size()), &decoded)
                  .ok());
  ASSERT_EQ(decoded.chunks.size(), 2);
  auto within = [&bytes](absl::string_view piece) {
    return piece.data() >= bytes.data() &&
           piece.data() + piece.size() <= bytes.data() + bytes.size();
  };
  size_t shared = 0;
  for (absl::string_view piece : decoded.chunks[0]->wire().Chunks()) {
    if (within(piece)) shared += piece.size();
  }
  EXPECT_GT(shared, 190u << 10);
  for (absl::string_view piece : decoded.chunks[1]->wire().Chunks()) {
    EXPECT_FALSE(within(piece));
  }
  EXPECT_EQ(std::string(decoded.chunks[0]->wire()),
            request.chunks(0).SerializeAsString());
}

TEST(InsertRequestTest, DecodesAnyParserInput) {
  // Keys unpacked, an unknown field, a chunk split across tiny slices.
  InsertStreamRequest request = ItemsAndKeys();
  *request.add_chunks() = *Chunk(3, {Tensor(50, 3)});
  std::string bytes = request.SerializeAsString();
  PutTag(3, kVarint, &bytes);  // keep_chunk_keys: 7, not packed.
  PutVarint64(7, &bytes);
  PutTag(15, kFixed32, &bytes);  // Unknown field.
  bytes.append(4, 'x');
  DecodedInsertRequest decoded;
  ASSERT_TRUE(DecodeInsertRequest(InPieces(bytes, 3), &decoded).ok());
  ASSERT_EQ(decoded.chunks.size(), 1);
  EXPECT_EQ(decoded.chunks[0]->key(), 3);
  ASSERT_EQ(decoded.items.size(), 1);
  EXPECT_EQ(decoded.items[0].key(), 99);
  EXPECT_EQ(decoded.keep_chunk_keys, std::vector<uint64_t>({1, 4, 7}));
}

TEST(InsertRequestTest, MalformedRequestsAreInvalidArguments) {
  InsertStreamRequest request = ItemsAndKeys();
  *request.add_chunks() = *Chunk(3, {Tensor(50, 3)});
  const std::string bytes = request.SerializeAsString();
  std::string bad_tensor_head;
  {
    ChunkData chunk = *Chunk(4, {});
    auto* tensor = chunk.mutable_data()->add_tensors();
    tensor->mutable_tensor_shape()->add_dim()->set_size(2);
    std::string tensor_bytes = tensor->SerializeAsString();
    tensor_bytes[1] = 100;  // tensor_shape's length runs past the tensor.
    chunk.clear_data();
    std::string chunk_bytes = chunk.SerializeAsString();
    std::string data;
    PutTag(1, kLengthDelimited, &data);
    PutVarint64(tensor_bytes.size(), &data);
    data += tensor_bytes;
    PutTag(5, kLengthDelimited, &chunk_bytes);
    PutVarint64(data.size(), &chunk_bytes);
    chunk_bytes += data;
    PutTag(1, kLengthDelimited, &bad_tensor_head);
    PutVarint64(chunk_bytes.size(), &bad_tensor_head);
    bad_tensor_head += chunk_bytes;
  }
  const std::vector<std::string> malformed = {
      bytes.substr(0, bytes.size() - 1),    // Truncated.
      bytes + "\x0b",                       // A group's tag.
      std::string("\x12\x03\xff\xff\xff"),  // An item that does not parse.
      bad_tensor_head,
  };
  for (const std::string& input : malformed) {
    DecodedInsertRequest decoded;
    EXPECT_EQ(DecodeInsertRequest(InPieces(input, 7), &decoded).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// Protobuf's log, while a test runs.
class CapturedProtobufLog {
 public:
  CapturedProtobufLog() { previous_ = google::protobuf::SetLogHandler(&Log); }
  ~CapturedProtobufLog() { google::protobuf::SetLogHandler(previous_); }
  static std::vector<std::string>& lines() {
    static auto* lines = new std::vector<std::string>;
    return *lines;
  }

 private:
  static void Log(google::protobuf::LogLevel, const char*, int,
                  const std::string& message) {
    lines().push_back(message);
  }
  google::protobuf::LogHandler* previous_;
};

TEST(InsertRequestTest, InvalidUtf8IsAnInvalidArgumentNotALogLine) {
  // An item's table (a proto3 string) that is not UTF-8.
  InsertStreamRequest request = ItemsAndKeys();
  request.mutable_items(0)->set_table("\xff\xfe");
  *request.add_chunks() = *Chunk(3, {Tensor(50, 3)});
  const std::string bytes = request.SerializeAsString();
  CapturedProtobufLog log;
  CapturedProtobufLog::lines().clear();
  {
    // Protobuf itself logs the error.
    InsertStreamRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(bytes));
    EXPECT_EQ(CapturedProtobufLog::lines().size(), 1);
  }
  CapturedProtobufLog::lines().clear();
  DecodedInsertRequest decoded;
  EXPECT_EQ(DecodeInsertRequest(InPieces(bytes, 7), &decoded).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CapturedProtobufLog::lines().empty())
      << CapturedProtobufLog::lines().front();
}

TEST(InsertRequestTest, MutatedRequestsDecodeOrAreInvalidArguments) {
  // Random byte changes and truncations of a valid request: every one
  // decodes, or is refused with INVALID_ARGUMENT; none may crash.
  InsertStreamRequest request = ItemsAndKeys();
  *request.add_chunks() = *Chunk(3, {Tensor(40, 3), Tensor(20 << 10, 4)});
  *request.add_chunks() = *Chunk(4, {Tensor(10, 5)});
  const std::string bytes = request.SerializeAsString();
  std::mt19937 random(42);
  int decoded_ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string mutated = bytes;
    const int changes = 1 + static_cast<int>(random() % 4);
    for (int c = 0; c < changes; ++c) {
      mutated[random() % mutated.size()] = static_cast<char>(random());
    }
    if (i % 3 == 0) mutated.resize(random() % mutated.size());
    DecodedInsertRequest decoded;
    const absl::Status status =
        DecodeInsertRequest(InPieces(mutated, 1 + random() % 9000), &decoded);
    if (status.ok()) {
      ++decoded_ok;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    }
  }
  // Changes inside tensor contents still decode.
  EXPECT_GT(decoded_ok, 0);
}

}  // namespace
}  // namespace deepmind::reverb
