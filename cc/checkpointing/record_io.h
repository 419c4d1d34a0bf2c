// TFRecord files, as TensorFlow's io::RecordWriter/RecordReader write and
// read them, so that checkpoints are readable by dm-reverb and TensorFlow.
//
// A record is framed as
//   uint64 length | uint32 masked_crc32c(length) | data | uint32
//   masked_crc32c(data)
// (little-endian). With ZLIB compression the whole framed stream is one
// zlib (RFC 1950) stream; any compression level reads back the same.
//
// Every read checks both checksums: a truncated or corrupted file is a
// DATA_LOSS error that names the file.
//
// Not thread-safe: use a reader or a writer from one thread at a time.
#ifndef REVERB_CC_CHECKPOINTING_RECORD_IO_H_
#define REVERB_CC_CHECKPOINTING_RECORD_IO_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

// CRC-32C (Castagnoli) of `data`, and the masked form TFRecord stores.
REVERB_EXPORT uint32_t Crc32c(absl::string_view data);
REVERB_EXPORT uint32_t MaskCrc32c(uint32_t crc);

class REVERB_EXPORT RecordWriter {
 public:
  // `zlib_level`: -1 for an uncompressed file, else 0 (stored) to 9.
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Create(
      const std::string& path, int zlib_level);
  ~RecordWriter();

  absl::Status Write(absl::string_view record);

  // Finishes the stream and flushes the file to disk (fsync).
  absl::Status Close();

 private:
  struct Zlib;
  RecordWriter(std::string path, std::FILE* file, std::unique_ptr<Zlib> zlib);
  // Writes raw (framed) bytes through the compressor, if any.
  absl::Status Append(absl::string_view bytes);

  const std::string path_;
  std::FILE* file_;
  std::unique_ptr<Zlib> zlib_;
};

class REVERB_EXPORT RecordReader {
 public:
  // Detects ZLIB compression from the stream header.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(
      const std::string& path);
  ~RecordReader();

  // The next record. OUT_OF_RANGE at the clean end of the file; DATA_LOSS
  // (naming the file) on truncation or a checksum mismatch.
  absl::StatusOr<std::string> Read();

  // Bytes of the file consumed so far (compressed bytes for a ZLIB file,
  // read-ahead included): progress against the file's size.
  uint64_t file_offset() const;

 private:
  struct Zlib;
  RecordReader(std::string path, std::FILE* file, std::unique_ptr<Zlib> zlib);
  // Reads exactly `n` bytes; returns how many were available.
  absl::StatusOr<size_t> ReadBytes(char* out, size_t n);
  absl::Status Corrupt(absl::string_view what) const;

  const std::string path_;
  std::FILE* file_;
  std::unique_ptr<Zlib> zlib_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CHECKPOINTING_RECORD_IO_H_
