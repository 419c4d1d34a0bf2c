#include "cc/support/wire_reader.h"

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "gtest/gtest.h"
#include "tensorflow/core/framework/tensor_shape.pb.h"

namespace deepmind::reverb {
namespace {

// `bytes` as a cord of one-byte pieces: every read crosses pieces.
absl::Cord Fragmented(const std::string& bytes) {
  absl::Cord cord;
  for (char c : bytes) cord.Append(absl::Cord(std::string(1, c)));
  return cord;
}

// A message of four fields: a varint, a length-delimited, a fixed64 and a
// fixed32.
std::string FourFields() {
  std::string bytes;
  PutTag(1, kVarint, &bytes);
  PutVarint64(UINT64_MAX, &bytes);        // Ten bytes.
  PutTag(200, kLengthDelimited, &bytes);  // A two-byte tag.
  PutVarint64(5, &bytes);
  bytes += "hello";
  PutTag(3, kFixed64, &bytes);
  bytes.append(8, 'f');
  PutTag(4, kFixed32, &bytes);
  bytes.append(4, 'g');
  return bytes;
}

// Reads FourFields() from `input`.
void ExpectFourFields(const absl::Cord& input) {
  WireReader reader(input);
  int field;
  WireType type;
  uint64_t value;
  ASSERT_TRUE(reader.ReadTag(&field, &type));
  EXPECT_EQ(field, 1);
  EXPECT_EQ(type, kVarint);
  ASSERT_TRUE(reader.ReadVarint(&value));
  EXPECT_EQ(value, UINT64_MAX);
  ASSERT_TRUE(reader.ReadTag(&field, &type));
  EXPECT_EQ(field, 200);
  EXPECT_EQ(type, kLengthDelimited);
  absl::Cord text;
  ASSERT_TRUE(reader.ReadLengthDelimited(&text));
  EXPECT_EQ(std::string(text), "hello");
  ASSERT_TRUE(reader.ReadTag(&field, &type));
  EXPECT_EQ(type, kFixed64);
  ASSERT_TRUE(reader.Skip(type));
  ASSERT_TRUE(reader.ReadTag(&field, &type));
  EXPECT_EQ(type, kFixed32);
  std::string copy;
  ASSERT_TRUE(reader.CopyField(field, type, &copy));
  EXPECT_EQ(copy, "\x25gggg");
  EXPECT_TRUE(reader.done());
}

TEST(WireReaderTest, ReadsFieldsAcrossPieces) {
  const absl::Cord input = Fragmented(FourFields());
  ASSERT_FALSE(input.TryFlat().has_value());
  ExpectFourFields(input);
}

TEST(WireReaderTest, ReadsAFlatInputAlike) {
  const absl::Cord input(FourFields());
  ASSERT_TRUE(input.TryFlat().has_value());
  ExpectFourFields(input);
}

TEST(WireReaderTest, ReadsALengthDelimitedValueInPlace) {
  // Field 1: a message of FourFields() and a nested value; then field 2.
  std::string nested;
  PutTag(9, kLengthDelimited, &nested);
  PutVarint64(3, &nested);
  nested += "abc";
  const std::string inner = FourFields() + nested;
  std::string bytes;
  PutTag(1, kLengthDelimited, &bytes);
  PutVarint64(inner.size(), &bytes);
  bytes += inner;
  PutTag(2, kVarint, &bytes);
  PutVarint64(300, &bytes);
  const absl::Cord inputs[] = {absl::Cord(bytes), Fragmented(bytes)};
  ASSERT_FALSE(inputs[1].TryFlat().has_value());
  for (const absl::Cord& input : inputs) {
    WireReader reader(input);
    int field;
    WireType type;
    WireReader value;
    EXPECT_TRUE(value.done());  // Empty until assigned.
    ASSERT_TRUE(reader.ReadTag(&field, &type));
    ASSERT_TRUE(reader.ReadLengthDelimited(&value));
    // The outer reader is past the value, the inner one reads just it.
    uint64_t number;
    ASSERT_TRUE(reader.ReadTag(&field, &type));
    EXPECT_EQ(field, 2);
    ASSERT_TRUE(reader.ReadVarint(&number));
    EXPECT_EQ(number, 300);
    EXPECT_TRUE(reader.done());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(value.ReadTag(&field, &type));
      ASSERT_TRUE(value.Skip(type));
    }
    // A value read from the inner reader is the input's bytes at its place.
    absl::Cord abc;
    ASSERT_TRUE(value.ReadTag(&field, &type));
    EXPECT_EQ(field, 9);
    ASSERT_TRUE(value.ReadLengthDelimited(&abc));
    EXPECT_EQ(std::string(abc), "abc");
    EXPECT_TRUE(value.done());
  }
  // A length past the end is refused.
  WireReader value;
  EXPECT_FALSE(WireReader(absl::Cord("\x05"
                                     "ab"))
                   .ReadLengthDelimited(&value));
}

TEST(WireReaderTest, LengthDelimitedValuesShareTheInput) {
  const std::string large(64 << 10, 'x');
  std::string head;
  PutTag(1, kLengthDelimited, &head);
  PutVarint64(large.size(), &head);
  absl::Cord input(head);
  input.Append(absl::MakeCordFromExternal(large, [] {}));
  WireReader reader(input);
  int field;
  WireType type;
  absl::Cord value;
  ASSERT_TRUE(reader.ReadTag(&field, &type));
  ASSERT_TRUE(reader.ReadLengthDelimited(&value));
  ASSERT_TRUE(value.TryFlat().has_value());
  EXPECT_EQ(value.TryFlat()->data(), large.data());
}

TEST(WireReaderTest, MalformedInputIsRefused) {
  int field;
  WireType type;
  uint64_t value;
  absl::Cord value_bytes;
  // A varint longer than ten bytes.
  const absl::Cord long_varint(std::string(11, '\x80'));
  EXPECT_FALSE(WireReader(long_varint).ReadVarint(&value));
  // Groups and field 0.
  EXPECT_FALSE(WireReader(absl::Cord("\x0b")).ReadTag(&field, &type));
  EXPECT_FALSE(
      WireReader(absl::Cord(std::string(1, '\0'))).ReadTag(&field, &type));
  // A tag padded to six bytes (field 5 << 25 | fixed32), which protobuf
  // refuses; its five-byte form is read.
  EXPECT_FALSE(
      WireReader(absl::Cord(std::string("\x85\x80\x80\x80\x80\x00", 6)))
          .ReadTag(&field, &type));
  EXPECT_TRUE(WireReader(absl::Cord(std::string("\x85\x80\x80\x80\x01", 5)))
                  .ReadTag(&field, &type));
  EXPECT_EQ(field, 1 << 25);
  // Lengths past the end.
  EXPECT_FALSE(WireReader(absl::Cord("\x05"
                                     "ab"))
                   .ReadLengthDelimited(&value_bytes));
  EXPECT_FALSE(WireReader(absl::Cord("abc")).Skip(kFixed32));
  std::string out;
  EXPECT_FALSE(WireReader(absl::Cord("\x05"
                                     "ab"))
                   .CopyField(1, kLengthDelimited, &out));
}

TEST(WireReaderTest, LengthsLongerThanFiveBytesAreRefused) {
  // Length 1 padded to six bytes, then its byte: protobuf refuses it
  // (found by chunk_fuzzer: Chunk::Parse accepted what protobuf did not).
  const std::string padded("\x81\x80\x80\x80\x80\x00x", 7);
  absl::Cord value;
  std::string out;
  EXPECT_FALSE(WireReader(absl::Cord(padded)).ReadLengthDelimited(&value));
  EXPECT_FALSE(WireReader(absl::Cord(padded)).Skip(kLengthDelimited));
  EXPECT_FALSE(
      WireReader(absl::Cord(padded)).CopyField(1, kLengthDelimited, &out));
  // Padded to five bytes, protobuf reads it; so does the reader.
  const std::string five("\x81\x80\x80\x80\x00x", 6);
  ASSERT_TRUE(WireReader(absl::Cord(five)).ReadLengthDelimited(&value));
  EXPECT_EQ(std::string(value), "x");
  tensorflow::TensorShapeProto::Dim dim;
  EXPECT_FALSE(dim.ParseFromString("\x12" + padded));
  EXPECT_TRUE(dim.ParseFromString("\x12" + five));
}

}  // namespace
}  // namespace deepmind::reverb
