#include "cc/support/wire_reader.h"

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

// `bytes` as a cord of one-byte pieces: every read crosses pieces.
absl::Cord Fragmented(const std::string& bytes) {
  absl::Cord cord;
  for (char c : bytes) cord.Append(absl::Cord(std::string(1, c)));
  return cord;
}

TEST(WireReaderTest, ReadsFieldsAcrossPieces) {
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
  const absl::Cord input = Fragmented(bytes);
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

}  // namespace
}  // namespace deepmind::reverb
