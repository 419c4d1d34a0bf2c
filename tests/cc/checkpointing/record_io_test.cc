#include "cc/checkpointing/record_io.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + std::to_string(::getpid())))
      .string();
}

// Includes incompressible data, so that a flipped byte of a compressed
// file changes what it decodes to.
std::vector<std::string> Records() {
  std::string noise(100000, '\0');
  uint32_t state = 12345;
  for (char& c : noise) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>(state >> 24);
  }
  return {"", "a", noise, "last record"};
}

void WriteRecords(const std::string& path, int level) {
  auto writer = RecordWriter::Create(path, level);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& record : Records())
    ASSERT_TRUE((*writer)->Write(record).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

absl::Status ReadAll(const std::string& path, std::vector<std::string>* out) {
  auto reader = RecordReader::Open(path);
  if (!reader.ok()) return reader.status();
  while (true) {
    auto record = (*reader)->Read();
    if (absl::IsOutOfRange(record.status())) return absl::OkStatus();
    if (!record.ok()) return record.status();
    out->push_back(*record);
  }
}

TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau);
  // Masking is a rotation plus a constant (TFRecord's).
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
}

TEST(RecordIoTest, RoundTripsCompressedAndNot) {
  for (int level : {-1, 0, 1, 9}) {
    SCOPED_TRACE(level);
    const std::string path = TempPath("records");
    WriteRecords(path, level);
    std::vector<std::string> read;
    ASSERT_TRUE(ReadAll(path, &read).ok());
    EXPECT_EQ(read, Records());
    std::remove(path.c_str());
  }
}

TEST(RecordIoTest, FramingIsTfRecord) {
  const std::string path = TempPath("framing");
  WriteRecords(path, -1);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  unsigned char header[12];
  ASSERT_EQ(std::fread(header, 1, 12, file), 12u);
  std::fclose(file);
  // The first record is empty: length 0, then the masked CRC of 8 zeros.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(header[i], 0);
  const uint32_t crc = header[8] | header[9] << 8 | header[10] << 16 |
                       static_cast<uint32_t>(header[11]) << 24;
  EXPECT_EQ(crc, MaskCrc32c(Crc32c(std::string(8, '\0'))));
  std::remove(path.c_str());
}

TEST(RecordIoTest, CorruptionAndTruncationAreDataLoss) {
  for (int level : {-1, 1}) {
    SCOPED_TRACE(level);
    const std::string path = TempPath("corrupt");
    WriteRecords(path, level);
    const auto size = std::filesystem::file_size(path);

    // Flip one byte in the middle.
    std::FILE* file = std::fopen(path.c_str(), "r+b");
    std::fseek(file, static_cast<long>(size / 2), SEEK_SET);
    const int byte = std::fgetc(file);
    std::fseek(file, static_cast<long>(size / 2), SEEK_SET);
    std::fputc(byte ^ 0x40, file);
    std::fclose(file);
    std::vector<std::string> read;
    absl::Status status = ReadAll(path, &read);
    EXPECT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_NE(status.message().find(path), std::string::npos);

    WriteRecords(path, level);
    std::filesystem::resize_file(path, size - 3);
    read.clear();
    EXPECT_TRUE(absl::IsDataLoss(ReadAll(path, &read)));
    std::remove(path.c_str());
  }
}

TEST(RecordIoTest, MissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(RecordReader::Open(TempPath("nope")).status()));
}

}  // namespace
}  // namespace deepmind::reverb
