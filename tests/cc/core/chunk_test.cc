#include "cc/core/chunk.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "cc/client/sample.h"
#include "cc/support/varint.h"
#include "cc/tensor/compression.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

// A chunk of two uint8 tensors of `rows` x `columns`, compressed as the
// writers do, and a string tensor.
ChunkData MakeChunk(int rows, int columns) {
  ChunkData chunk;
  chunk.set_chunk_key(42);
  chunk.mutable_sequence_range()->set_episode_id(7);
  chunk.mutable_sequence_range()->set_end(rows - 1);
  chunk.set_data_tensors_len(3);
  for (int t = 0; t < 2; ++t) {
    Tensor tensor;
    tensor.dtype = tensorflow::DT_UINT8;
    tensor.shape = {rows, columns};
    tensor.bytes.resize(static_cast<size_t>(rows) * columns);
    for (size_t i = 0; i < tensor.bytes.size(); ++i) {
      tensor.bytes[i] = static_cast<char>((i * 7919 + t) % 251);
    }
    EXPECT_TRUE(CompressTensorAsProto(std::move(tensor),
                                      chunk.mutable_data()->add_tensors())
                    .ok());
  }
  tensorflow::TensorProto* strings = chunk.mutable_data()->add_tensors();
  strings->set_dtype(tensorflow::DT_STRING);
  strings->mutable_tensor_shape()->add_dim()->set_size(rows);
  for (int r = 0; r < rows; ++r) strings->add_string_val("step");
  return chunk;
}

// ParseChunkHeader with the contents as views (of `bytes`, which is flat).
absl::Status ParseViews(const absl::Cord& bytes, ChunkData* header,
                        std::vector<absl::string_view>* contents) {
  std::vector<absl::Cord> pieces;
  absl::Status status = ParseChunkHeader(bytes, header, &pieces);
  contents->clear();
  for (const absl::Cord& piece : pieces) contents->push_back(*piece.TryFlat());
  return status;
}

TEST(ParseChunkHeaderTest, HeaderAndContentsMakeTheSameChunk) {
  const ChunkData chunk = MakeChunk(4, 1000);
  const absl::Cord bytes(chunk.SerializeAsString());
  ChunkData header;
  std::vector<absl::string_view> contents;
  ASSERT_TRUE(ParseViews(bytes, &header, &contents).ok());
  ASSERT_EQ(contents.size(), 3);
  ChunkData rebuilt = header;
  for (int t = 0; t < 3; ++t) {
    EXPECT_TRUE(header.data().tensors(t).tensor_content().empty());
    rebuilt.mutable_data()->mutable_tensors(t)->set_tensor_content(
        std::string(contents[t]));
  }
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(rebuilt, chunk));
  // The views point into the bytes, not at copies.
  const absl::string_view flat = *bytes.TryFlat();
  EXPECT_GE(contents[0].data(), flat.data());
  EXPECT_LE(contents[0].data() + contents[0].size(), flat.data() + flat.size());
  EXPECT_TRUE(contents[2].empty());  // string_val, no content.
}

TEST(ParseChunkHeaderTest, SampleUnpackedFromViewsEqualsTheProtoPath) {
  const ChunkData chunk = MakeChunk(4, 1000);
  const absl::Cord bytes(chunk.SerializeAsString());
  ChunkData header;
  std::vector<absl::string_view> contents;
  ASSERT_TRUE(ParseViews(bytes, &header, &contents).ok());

  auto info = std::make_shared<SampleInfo>();
  FlatTrajectory* trajectory = info->mutable_item()->mutable_flat_trajectory();
  for (int t = 0; t < 3; ++t) {
    auto* slice = trajectory->add_columns()->add_chunk_slices();
    slice->set_chunk_key(42);
    slice->set_offset(1);
    slice->set_length(2);
    slice->set_index(t);
  }
  const ChunkData* from_proto[] = {&chunk};
  const ChunkData* from_views[] = {&header};
  ChunkContents apart;
  apart.views = contents;
  const ChunkContents* views[] = {&apart};
  auto expected = UnpackSample(info, from_proto);
  auto actual = UnpackSample(info, from_views, views);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(actual.ok()) << actual.status();
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(actual->columns[t].shape, expected->columns[t].shape);
    EXPECT_EQ(actual->columns[t].bytes, expected->columns[t].bytes);
    EXPECT_EQ(actual->columns[t].strings, expected->columns[t].strings);
  }
  // Without its contents, the header alone holds no data.
  EXPECT_FALSE(UnpackSample(info, from_views).ok());
}

TEST(ParseChunkHeaderTest, DataGivenTwiceMergesIntoAHeaderOnAnArena) {
  // The wire of two chunks' `data` (fields of a message given twice merge),
  // with the key after them: protobuf's parse, contents apart, in order.
  const ChunkData first = MakeChunk(4, 1000);
  ChunkData second = MakeChunk(2, 30);
  second.clear_sequence_range();
  second.set_chunk_key(43);
  const absl::Cord bytes(first.SerializeAsString() +
                         second.SerializeAsString());
  ChunkData expected;
  ASSERT_TRUE(expected.ParseFromString(std::string(bytes)));
  ASSERT_EQ(expected.data().tensors_size(), 6);
  for (const bool on_arena : {false, true}) {
    SCOPED_TRACE(on_arena);
    google::protobuf::Arena arena;
    ChunkData* header =
        on_arena ? google::protobuf::Arena::CreateMessage<ChunkData>(&arena)
                 : new ChunkData();
    std::vector<absl::string_view> contents;
    ASSERT_TRUE(ParseViews(bytes, header, &contents).ok());
    ASSERT_EQ(contents.size(), 6);
    ChunkData rebuilt = *header;
    for (int t = 0; t < 6; ++t) {
      rebuilt.mutable_data()->mutable_tensors(t)->set_tensor_content(
          std::string(contents[t]));
    }
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals(rebuilt, expected));
    EXPECT_EQ(header->chunk_key(), 43);
    if (!on_arena) delete header;
  }
  // Without tensors, the header has its (empty) `data`, as protobuf's.
  ChunkData bare;
  bare.set_chunk_key(5);
  bare.mutable_data();
  ChunkData header;
  std::vector<absl::string_view> contents;
  ASSERT_TRUE(
      ParseViews(absl::Cord(bare.SerializeAsString()), &header, &contents)
          .ok());
  EXPECT_TRUE(header.has_data());
  EXPECT_TRUE(contents.empty());
}

TEST(ParseChunkHeaderTest, MalformedBytesAreInvalidArgument) {
  std::string bytes = MakeChunk(2, 100).SerializeAsString();
  ChunkData header;
  std::vector<absl::string_view> contents;
  for (size_t cut : {size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_TRUE(absl::IsInvalidArgument(
        ParseViews(absl::Cord(bytes.substr(0, cut)), &header, &contents)));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseViews(absl::Cord("\xff\xff\xff"), &header, &contents)));
}

// The fields a Chunk keeps, as protobuf parses them from `bytes`.
void ExpectParsedAsProtobufDoes(const absl::Cord& bytes) {
  ChunkData proto;
  ASSERT_TRUE(proto.ParseFromString(std::string(bytes)));
  auto chunk = Chunk::Parse(bytes);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ((*chunk)->key(), proto.chunk_key());
  EXPECT_EQ((*chunk)->episode_id(), proto.sequence_range().episode_id());
  EXPECT_EQ((*chunk)->num_rows(),
            proto.sequence_range().end() - proto.sequence_range().start() + 1);
  EXPECT_EQ((*chunk)->num_columns(), proto.data_tensors_len() > 0
                                         ? proto.data_tensors_len()
                                         : proto.data().tensors_size());
  EXPECT_EQ((*chunk)->uncompressed_data_size(),
            std::max<int64_t>(1, proto.data_uncompressed_size()));
  EXPECT_EQ((*chunk)->DataByteSizeLong(), bytes.size());
}

// A chunk as the writers make it: a key, a range, sizes, delta encoding
// and tensors of a dtype, a shape of sizes and a content.
ChunkData WriterChunk() {
  ChunkData chunk = MakeChunk(3, 400);
  chunk.mutable_data()->mutable_tensors()->RemoveLast();  // The strings.
  chunk.set_data_tensors_len(0);
  chunk.mutable_sequence_range()->set_episode_id(uint64_t{1} << 63);
  chunk.mutable_sequence_range()->set_start(-5);
  chunk.mutable_sequence_range()->set_end(-3);
  chunk.set_data_uncompressed_size(2400);
  chunk.set_delta_encoded(true);
  chunk.set_chunk_key(~uint64_t{0});
  return chunk;
}

TEST(ChunkParseTest, TheWritersFormIsReadInPlaceAsProtobufReadsIt) {
  const std::string bytes = WriterChunk().SerializeAsString();
  ASSERT_GT(bytes.size(), 600);  // Two pieces or more, below.
  for (const absl::Cord& cord :
       {absl::Cord(bytes), testing::InPieces(bytes, 600)}) {
    EXPECT_TRUE(Chunk::ParsesInPlace(cord));
    ExpectParsedAsProtobufDoes(cord);
  }
  auto chunk = Chunk::Parse(absl::Cord(bytes));
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ((*chunk)->num_rows(), 3);
  EXPECT_EQ((*chunk)->num_columns(), 2);  // Its tensors: no data_tensors_len.
}

// `bytes` and field `field` of `value`, length-delimited.
std::string WithField(std::string bytes, int field, const std::string& value) {
  PutTag(field, kLengthDelimited, &bytes);
  PutVarint64(value.size(), &bytes);
  return bytes + value;
}

TEST(ChunkParseTest, OtherFormsTakeProtobufsPathToTheSameFields) {
  ChunkData named = WriterChunk();
  named.mutable_data()
      ->mutable_tensors(0)
      ->mutable_tensor_shape()
      ->mutable_dim(0)
      ->set_name("time");
  const std::string writers = WriterChunk().SerializeAsString();
  const std::string others[] = {
      MakeChunk(2, 50).SerializeAsString(),  // A tensor of string_val.
      named.SerializeAsString(),
      // Deprecated tensors (field 3).
      WithField(writers, 3,
                WriterChunk().data().tensors(0).SerializeAsString()),
      // A second sequence range, which protobuf merges into the first: an
      // end, and field 5, which SequenceRange does not have.
      WithField(writers, 2, "\x18\x07\x28\x01"),
      // An unknown field.
      WithField(writers, 77, "x"),
  };
  for (const std::string& bytes : others) {
    for (const absl::Cord& cord :
         {absl::Cord(bytes), testing::InPieces(bytes, 600)}) {
      EXPECT_FALSE(Chunk::ParsesInPlace(cord));
      ExpectParsedAsProtobufDoes(cord);
    }
  }
}

TEST(ChunkParseTest, WhatProtobufRefusesIsInvalidArgument) {
  // A dim name of invalid UTF-8: protobuf refuses the string.
  ChunkData named = WriterChunk();
  named.mutable_data()
      ->mutable_tensors(0)
      ->mutable_tensor_shape()
      ->mutable_dim(0)
      ->set_name("\xff\xfe");
  std::string bytes;
  ASSERT_TRUE(named.SerializePartialToString(&bytes));
  ChunkData proto;
  ASSERT_FALSE(proto.ParseFromString(bytes));
  EXPECT_TRUE(
      absl::IsInvalidArgument(Chunk::Parse(absl::Cord(bytes)).status()));
  // The writers' form cut short, anywhere.
  const std::string whole = WriterChunk().SerializeAsString();
  for (size_t cut = 1; cut < whole.size(); cut += 7) {
    const std::string part = whole.substr(0, cut);
    if (proto.ParseFromString(part)) continue;  // Cut between fields.
    EXPECT_TRUE(
        absl::IsInvalidArgument(Chunk::Parse(absl::Cord(part)).status()))
        << "cut at " << cut;
  }
}

}  // namespace
}  // namespace deepmind::reverb
