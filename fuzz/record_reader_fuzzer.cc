// Fuzzes RecordReader (cc/checkpointing/record_io.h) over any file: the
// input's first byte picks the file's form, the rest is its content, as it
// is (first byte even) or as one zlib stream (odd), so that the record
// framing is fuzzed under compression too. Reading ends with OUT_OF_RANGE
// or DATA_LOSS; the records read from a stream we compressed fit in its
// content.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "cc/checkpointing/record_io.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/temp_dir.h"
#include "zlib.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string content(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool compressed_here = data[0] % 2 == 1;
  if (compressed_here) {
    uLongf compressed_size = compressBound(content.size());
    std::string compressed(compressed_size, '\0');
    FUZZ_CHECK(compress2(reinterpret_cast<Bytef*>(compressed.data()),
                         &compressed_size,
                         reinterpret_cast<const Bytef*>(content.data()),
                         content.size(), Z_BEST_SPEED) == Z_OK);
    compressed.resize(compressed_size);
    content = std::move(compressed);
  }
  const std::string path =
      (deepmind::reverb::fuzzing::TempDir() / "records").string();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(file != nullptr);
  FUZZ_CHECK(std::fwrite(content.data(), 1, content.size(), file) ==
             content.size());
  FUZZ_CHECK(std::fclose(file) == 0);

  auto reader = deepmind::reverb::RecordReader::Open(path);
  FUZZ_CHECK(reader.ok());
  size_t total = 0;
  while (true) {
    auto record = (*reader)->Read();
    if (!record.ok()) {
      FUZZ_CHECK(absl::IsOutOfRange(record.status()) ||
                 absl::IsDataLoss(record.status()));
      break;
    }
    total += record->size() + 16;
    // (Content given as it is may be a zlib stream of its own.)
    FUZZ_CHECK(!compressed_here || total <= size - 1);
  }
  return 0;
}
