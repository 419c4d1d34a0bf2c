#include "cc/tensor/snappy_decode.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "snappy.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

std::string Compress(const std::string& input) {
  std::string compressed;
  snappy::Compress(input.data(), input.size(), &compressed);
  return compressed;
}

// Decodes with our decoder into a buffer of the recorded length; false if
// either step fails.
bool Decode(const std::string& compressed, std::string* out) {
  size_t length = 0;
  if (!SnappyUncompressedLength(compressed, &length)) return false;
  out->assign(length, '\0');
  return SnappyUncompress(compressed, out->data(), length);
}

std::string Periodic(size_t size, size_t period, uint32_t seed) {
  std::mt19937 random(seed);
  std::string unit(period, '\0');
  for (char& c : unit) c = static_cast<char>(random());
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = unit[i % period];
  return out;
}

std::string Random(size_t size, uint32_t alphabet, uint32_t seed) {
  std::mt19937 random(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(random() % alphabet);
  return out;
}

// Inputs that make the compressor use every kind of element: patterns of
// every short period (and some long ones) end to end, runs between random
// stretches, literals long enough for each length encoding.
std::vector<std::string> Inputs() {
  std::vector<std::string> inputs = {"", "a", std::string(84 * 84 * 4, 7)};
  for (size_t period = 1; period <= 40; ++period) {
    for (size_t size : {period, 17 + period, 100 + period, 4096 + period}) {
      inputs.push_back(Periodic(size, period, static_cast<uint32_t>(size)));
    }
  }
  for (size_t size : {1, 15, 16, 17, 61, 300, 70000, 300000}) {
    inputs.push_back(Random(size, 256, static_cast<uint32_t>(size)));
    inputs.push_back(Random(size, 3, static_cast<uint32_t>(size)));
  }
  std::string mixed;
  for (int i = 0; i < 200; ++i) {
    mixed += Random(i % 37, 256, i) +
             std::string(i % 91, static_cast<char>(i)) +
             Periodic(i % 53 + 5, i % 7 + 1, i);
  }
  inputs.push_back(mixed);
  return inputs;
}

TEST(SnappyDecodeTest, DecodesWhatSnappyCompresses) {
  for (const std::string& input : Inputs()) {
    std::string out;
    ASSERT_TRUE(Decode(Compress(input), &out)) << input.size() << " bytes";
    ASSERT_EQ(out, input) << input.size() << " bytes";
  }
}

// Hand-made streams reach the elements libsnappy's compressor rarely or
// never writes.
TEST(SnappyDecodeTest, DecodesEveryElementEncoding) {
  // Literal lengths in the tag and in 1, 2, 3 and 4 extra bytes.
  for (uint32_t size : {1u, 60u, 61u, 256u, 257u, 65537u, 70000u}) {
    const std::string literal = Random(size, 256, size);
    std::string stream;
    for (uint32_t v = size;; v >>= 7) {  // varint
      stream.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
      if (v < 0x80) break;
    }
    const uint32_t stored = size - 1;
    if (stored < 60) {
      stream.push_back(static_cast<char>(stored << 2));
    } else {
      const int bytes = stored < (1u << 8)    ? 1
                        : stored < (1u << 16) ? 2
                        : stored < (1u << 24) ? 3
                                              : 4;
      stream.push_back(static_cast<char>((59 + bytes) << 2));
      for (int i = 0; i < bytes; ++i) {
        stream.push_back(static_cast<char>(stored >> (8 * i)));
      }
    }
    std::string out;
    ASSERT_TRUE(Decode(stream + literal, &out)) << size;
    EXPECT_EQ(out, literal) << size;
  }
  // "abc", then copies from offset 3 with 1-, 2- and 4-byte offsets, then
  // 11 bytes from offset 1.
  const std::string stream = std::string("\x16", 1) +  // 22 bytes
                             std::string(
                                 "\x08"
                                 "abc",
                                 4) +                          // literal 3
                             std::string("\x05\x03", 2) +      // 5 @ 3
                             std::string("\x02\x03\x00", 3) +  // 1 @ 3
                             std::string("\x07\x03\x00\x00\x00", 5) +  // 2 @ 3
                             std::string("\x1d\x01", 2);               // 11 @ 1
  std::string out;
  ASSERT_TRUE(Decode(stream, &out));
  EXPECT_EQ(out, "abcabcabcab" + std::string(11, 'b'));
}

TEST(SnappyDecodeTest, StoredOffsetFindsTheOneLiteralOfAStoredStream) {
  // Stored streams as compression.h writes them: the length, then one
  // literal of every byte (tags of 1 to 4 length bytes, and none).
  for (size_t size : {size_t{1}, size_t{60}, size_t{61}, size_t{300},
                      size_t{70000}, size_t{1} << 24}) {
    SCOPED_TRACE(size);
    const std::string data = Random(size, 256, 3);
    std::string stream;
    for (uint32_t v = static_cast<uint32_t>(size);; v >>= 7) {
      stream.push_back(static_cast<char>(v < 0x80 ? v : (v & 0x7f) | 0x80));
      if (v < 0x80) break;
    }
    const size_t n = size - 1;
    if (n < 60) {
      stream.push_back(static_cast<char>(n << 2));
    } else {
      const int bytes = n < (1 << 8)    ? 1
                        : n < (1 << 16) ? 2
                        : n < (1 << 24) ? 3
                                        : 4;
      stream.push_back(static_cast<char>((59 + bytes) << 2));
      for (int i = 0; i < bytes; ++i) {
        stream.push_back(static_cast<char>(n >> (8 * i)));
      }
    }
    const size_t header = stream.size();
    stream += data;
    std::string decoded;
    ASSERT_TRUE(Decode(stream, &decoded));
    ASSERT_EQ(decoded, data);
    size_t offset = 0;
    ASSERT_TRUE(SnappyStoredOffset(stream, size, &offset));
    EXPECT_EQ(offset, header);
    // Another length, a stream cut short or longer: not stored.
    EXPECT_FALSE(SnappyStoredOffset(stream, size + 1, &offset));
    EXPECT_FALSE(
        SnappyStoredOffset(stream.substr(0, stream.size() - 1), size, &offset));
    EXPECT_FALSE(SnappyStoredOffset(stream + "x", size, &offset));
    // The same in pieces (as gRPC receives them): only the head is read.
    for (size_t piece : {size_t{1}, size_t{3}, size_t{700}}) {
      const absl::Cord pieces = testing::InPieces(stream, piece);
      size_t in_pieces = 0;
      ASSERT_TRUE(SnappyStoredOffset(pieces, size, &in_pieces));
      EXPECT_EQ(in_pieces, header);
      EXPECT_FALSE(SnappyStoredOffset(pieces, size + 1, &in_pieces));
    }
  }
  // What snappy compresses (copies, or several literals) is not stored.
  const std::string periodic = Periodic(4096, 7, 1);
  size_t offset = 0;
  EXPECT_FALSE(
      SnappyStoredOffset(Compress(periodic), periodic.size(), &offset));
  EXPECT_FALSE(SnappyStoredOffset("", 0, &offset));
}

TEST(SnappyDecodeTest, RejectsCorruptStreams) {
  std::string out(64, '\0');
  const auto decodes = [&out](const std::string& stream, size_t length) {
    return SnappyUncompress(stream, out.data(), length);
  };
  EXPECT_TRUE(decodes(std::string("\x03\x08"
                                  "abc",
                                  5),
                      3));
  EXPECT_FALSE(decodes(std::string("\x03\x08"
                                   "abc",
                                   5),
                       4));  // length
  EXPECT_FALSE(decodes(std::string("\x04\x08"
                                   "abc",
                                   5),
                       4));  // short
  EXPECT_FALSE(decodes(std::string("\x03\x08"
                                   "ab",
                                   4),
                       3));  // truncated
  EXPECT_FALSE(decodes(std::string("\x03\x0c"
                                   "abc",
                                   5),
                       3));  // too long
  EXPECT_FALSE(decodes(std::string("\x05\x00"
                                   "a\x01\x00",
                                   5),
                       5));  // 0
  EXPECT_FALSE(decodes(std::string("\x05\x00"
                                   "a\x01\x02",
                                   5),
                       5));  // 2 > 1
  EXPECT_FALSE(decodes(std::string("\x05\x00"
                                   "a\x0d\x01",
                                   5),
                       5));  // 7 > 4
  EXPECT_FALSE(decodes(std::string("\x05\x00"
                                   "a\x01",
                                   3),
                       5));  // no offset
  // A literal of 2 bytes with 1 left.
  EXPECT_FALSE(decodes(std::string("\x05\x00"
                                   "a\xf0\x01\x00",
                                   5),
                       5));
  size_t length = 0;
  EXPECT_FALSE(SnappyUncompressedLength(std::string("\x80\x80", 2), &length));
  EXPECT_FALSE(SnappyUncompressedLength(
      std::string("\xff\xff\xff\xff\xff\x01", 6), &length));
  // A fifth byte with bits beyond the 32 (libsnappy refuses it too).
  EXPECT_FALSE(SnappyUncompressedLength(std::string("\xf0\xfd\xfd\xfe\x3d", 5),
                                        &length));
  EXPECT_FALSE(decodes(std::string("\x80\x80\x80\x80\x10", 5), 0));
  EXPECT_TRUE(SnappyUncompressedLength(std::string("\xff\xff\xff\xff\x0f", 5),
                                       &length));
  EXPECT_EQ(length, 0xffffffffu);

  // Every strict prefix of a valid stream is rejected.
  const std::string input = Periodic(3000, 3, 1) + Random(3000, 256, 2);
  const std::string compressed = Compress(input);
  std::string decoded(input.size(), '\0');
  for (size_t size = 0; size < compressed.size(); ++size) {
    EXPECT_FALSE(SnappyUncompress(compressed.substr(0, size), decoded.data(),
                                  decoded.size()))
        << size;
  }
}

// A literal whose 4-byte length is 2^32 - 1: libsnappy adds 1 in 32 bits,
// which makes a literal of 0 bytes, and decodes the rest (found by
// snappy_fuzzer: we refused the stream).
TEST(SnappyDecodeTest, LiteralLengthWrapsAt32BitsAsInLibsnappy) {
  const std::string stream("\x02\xfc\xff\xff\xff\xff\x00.\x00\x00", 10);
  std::string theirs(2, '\0');
  ASSERT_TRUE(
      snappy::RawUncompress(stream.data(), stream.size(), theirs.data()));
  std::string ours;
  ASSERT_TRUE(Decode(stream, &ours));
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(ours, std::string(".\0", 2));
}

// Random damage to valid streams: our decoder accepts exactly what
// libsnappy accepts and produces the same bytes (run under sanitizers, it
// also shows nothing is touched out of bounds).
TEST(SnappyDecodeTest, AgreesWithLibsnappyOnDamagedStreams) {
  const std::vector<std::string> inputs = {
      std::string(2000, 7), Periodic(2000, 5, 3), Random(2000, 4, 4),
      Periodic(700, 11, 5) + Random(700, 256, 6) + Periodic(700, 2, 7)};
  std::mt19937 random(42);
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string stream = Compress(inputs[trial % inputs.size()]);
    for (int flips = 1 + random() % 3; flips > 0; --flips) {
      stream[random() % stream.size()] ^= static_cast<char>(1 + random() % 255);
    }
    size_t theirs_length = 0;
    const bool theirs_length_ok = snappy::GetUncompressedLength(
        stream.data(), stream.size(), &theirs_length);
    size_t length = 0;
    ASSERT_EQ(SnappyUncompressedLength(stream, &length), theirs_length_ok);
    if (!theirs_length_ok || length > (1 << 16)) continue;
    ASSERT_EQ(length, theirs_length);
    std::string theirs(length, '\0');
    std::string ours(length, '\0');
    const bool theirs_ok =
        snappy::RawUncompress(stream.data(), stream.size(), theirs.data());
    ASSERT_EQ(SnappyUncompress(stream, ours.data(), length), theirs_ok)
        << "trial " << trial;
    if (theirs_ok) {
      ASSERT_EQ(ours, theirs) << "trial " << trial;
      ++accepted;
    }
  }
  // Some damage leaves a valid stream (a literal byte changed), so both
  // paths of the comparison ran.
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace deepmind::reverb
