#include "cc/checkpointing/record_io.h"

#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {
namespace {

constexpr size_t kBufferSize = 1 << 20;
constexpr uint32_t kMaskDelta = 0xa282ead8u;

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table;
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    table[i] = crc;
  }
  return table;
}

uint32_t Crc32cPortable(uint32_t crc, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(uint32_t crc,
                                                       const unsigned char* p,
                                                       size_t n) {
  uint64_t crc64 = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc64 = __builtin_ia32_crc32di(crc64, word);
    p += 8;
    n -= 8;
  }
  crc = static_cast<uint32_t>(crc64);
  while (n-- > 0) crc = __builtin_ia32_crc32qi(crc, *p++);
  return crc;
}
#endif

void PutFixed64(uint64_t value, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (8 * i));
}
void PutFixed32(uint32_t value, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(value >> (8 * i));
}
uint64_t GetFixed64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i]))
             << (8 * i);
  }
  return value;
}
uint32_t GetFixed32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<unsigned char>(in[i]))
             << (8 * i);
  }
  return value;
}

absl::Status IoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__x86_64__)
  static const bool kHasSse42 = __builtin_cpu_supports("sse4.2");
  if (kHasSse42) return ~Crc32cSse42(~0u, p, data.size());
#endif
  return ~Crc32cPortable(~0u, p, data.size());
}

uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

// --- Writer ------------------------------------------------------------------

struct RecordWriter::Zlib {
  z_stream stream{};
  std::vector<char> out = std::vector<char>(kBufferSize);
};

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(
    const std::string& path, int zlib_level) {
  if (zlib_level < -1 || zlib_level > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("zlib level ", zlib_level, " is not in [-1, 9]."));
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return IoError("Could not create", path);
  std::unique_ptr<Zlib> zlib;
  if (zlib_level >= 0) {
    zlib = std::make_unique<Zlib>();
    if (deflateInit(&zlib->stream, zlib_level) != Z_OK) {
      std::fclose(file);
      return absl::InternalError("deflateInit failed.");
    }
  }
  return std::unique_ptr<RecordWriter>(
      new RecordWriter(path, file, std::move(zlib)));
}

RecordWriter::RecordWriter(std::string path, std::FILE* file,
                           std::unique_ptr<Zlib> zlib)
    : path_(std::move(path)), file_(file), zlib_(std::move(zlib)) {}

RecordWriter::~RecordWriter() {
  if (zlib_ != nullptr) deflateEnd(&zlib_->stream);
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status RecordWriter::Append(absl::string_view bytes) {
  if (zlib_ == nullptr) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      return IoError("Could not write", path_);
    }
    return absl::OkStatus();
  }
  z_stream& stream = zlib_->stream;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  while (stream.avail_in > 0) {
    stream.next_out = reinterpret_cast<Bytef*>(zlib_->out.data());
    stream.avail_out = static_cast<uInt>(zlib_->out.size());
    if (deflate(&stream, Z_NO_FLUSH) == Z_STREAM_ERROR) {
      return absl::InternalError(
          absl::StrCat("Compression failed for ", path_));
    }
    const size_t produced = zlib_->out.size() - stream.avail_out;
    if (std::fwrite(zlib_->out.data(), 1, produced, file_) != produced) {
      return IoError("Could not write", path_);
    }
  }
  return absl::OkStatus();
}

absl::Status RecordWriter::Write(absl::string_view record) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, " is closed."));
  }
  char header[12];
  PutFixed64(record.size(), header);
  PutFixed32(MaskCrc32c(Crc32c(absl::string_view(header, 8))), header + 8);
  char footer[4];
  PutFixed32(MaskCrc32c(Crc32c(record)), footer);
  REVERB_RETURN_IF_ERROR(Append(absl::string_view(header, sizeof(header))));
  // Large records go through in slices (zlib counts in 32-bit units).
  for (size_t offset = 0; offset < record.size(); offset += kBufferSize * 64) {
    REVERB_RETURN_IF_ERROR(Append(record.substr(offset, kBufferSize * 64)));
  }
  return Append(absl::string_view(footer, sizeof(footer)));
}

absl::Status RecordWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  if (zlib_ != nullptr) {
    z_stream& stream = zlib_->stream;
    stream.avail_in = 0;
    int result;
    do {
      stream.next_out = reinterpret_cast<Bytef*>(zlib_->out.data());
      stream.avail_out = static_cast<uInt>(zlib_->out.size());
      result = deflate(&stream, Z_FINISH);
      const size_t produced = zlib_->out.size() - stream.avail_out;
      if (std::fwrite(zlib_->out.data(), 1, produced, file_) != produced) {
        return IoError("Could not write", path_);
      }
    } while (result == Z_OK);
    if (result != Z_STREAM_END) {
      return absl::InternalError(
          absl::StrCat("Compression failed for ", path_));
    }
  }
  const bool ok = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) return IoError("Could not write", path_);
  return absl::OkStatus();
}

// --- Reader ------------------------------------------------------------------

struct RecordReader::Zlib {
  z_stream stream{};
  std::vector<char> in = std::vector<char>(kBufferSize);
  bool finished = false;
};

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(
    const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist."));
    }
    return IoError("Could not open", path);
  }
  // A zlib stream starts with CMF (deflate, window <= 32K) and FLG such that
  // CMF * 256 + FLG is a multiple of 31. A TFRecord starts with the low
  // bytes of a length and its checksum, which in practice never match both.
  unsigned char head[2] = {0, 0};
  const size_t got = std::fread(head, 1, 2, file);
  std::rewind(file);
  std::unique_ptr<Zlib> zlib;
  if (got == 2 && (head[0] & 0x0f) == 8 && (head[0] >> 4) <= 7 &&
      (head[0] * 256 + head[1]) % 31 == 0) {
    zlib = std::make_unique<Zlib>();
    if (inflateInit(&zlib->stream) != Z_OK) {
      std::fclose(file);
      return absl::InternalError("inflateInit failed.");
    }
  }
  return std::unique_ptr<RecordReader>(
      new RecordReader(path, file, std::move(zlib)));
}

RecordReader::RecordReader(std::string path, std::FILE* file,
                           std::unique_ptr<Zlib> zlib)
    : path_(std::move(path)), file_(file), zlib_(std::move(zlib)) {}

uint64_t RecordReader::file_offset() const {
  const long offset = std::ftell(file_);  // NOLINT(runtime/int): ftell's type.
  return offset < 0 ? 0 : static_cast<uint64_t>(offset);
}

RecordReader::~RecordReader() {
  if (zlib_ != nullptr) inflateEnd(&zlib_->stream);
  std::fclose(file_);
}

absl::Status RecordReader::Corrupt(absl::string_view what) const {
  return absl::DataLossError(
      absl::StrCat("Checkpoint file ", path_, " is corrupt: ", what, "."));
}

absl::StatusOr<size_t> RecordReader::ReadBytes(char* out, size_t n) {
  if (zlib_ == nullptr) return std::fread(out, 1, n, file_);
  z_stream& stream = zlib_->stream;
  stream.next_out = reinterpret_cast<Bytef*>(out);
  stream.avail_out = static_cast<uInt>(n);
  while (stream.avail_out > 0 && !zlib_->finished) {
    if (stream.avail_in == 0) {
      const size_t read =
          std::fread(zlib_->in.data(), 1, zlib_->in.size(), file_);
      if (read == 0) return Corrupt("the compressed stream is truncated");
      stream.next_in = reinterpret_cast<Bytef*>(zlib_->in.data());
      stream.avail_in = static_cast<uInt>(read);
    }
    const int result = inflate(&stream, Z_NO_FLUSH);
    if (result == Z_STREAM_END) {
      zlib_->finished = true;
    } else if (result != Z_OK) {
      return Corrupt(absl::StrCat("zlib error ", result));
    }
  }
  return n - stream.avail_out;
}

absl::StatusOr<std::string> RecordReader::Read() {
  char header[12];
  REVERB_ASSIGN_OR_RETURN(size_t got, ReadBytes(header, sizeof(header)));
  if (got == 0) return absl::OutOfRangeError(absl::StrCat("End of ", path_));
  if (got != sizeof(header)) return Corrupt("truncated record header");
  if (GetFixed32(header + 8) !=
      MaskCrc32c(Crc32c(absl::string_view(header, 8)))) {
    return Corrupt("record length checksum mismatch");
  }
  const uint64_t length = GetFixed64(header);
  // Grow as the data arrives, so that a corrupt length cannot allocate.
  std::string record;
  for (uint64_t offset = 0; offset < length;) {
    const size_t step = static_cast<size_t>(
        std::min<uint64_t>(length - offset, 64 * kBufferSize));
    record.resize(offset + step);
    REVERB_ASSIGN_OR_RETURN(got, ReadBytes(record.data() + offset, step));
    if (got != step) return Corrupt("truncated record");
    offset += step;
  }
  char footer[4];
  REVERB_ASSIGN_OR_RETURN(got, ReadBytes(footer, sizeof(footer)));
  if (got != sizeof(footer)) return Corrupt("truncated record");
  if (GetFixed32(footer) != MaskCrc32c(Crc32c(record))) {
    return Corrupt("record data checksum mismatch");
  }
  return record;
}

}  // namespace deepmind::reverb
