// Fuzzes Checkpointer::Load (cc/checkpointing/checkpointer.h) past the
// files' checksums: the input is a list of records, each a byte choosing
// its file (tables, items or chunks), a varint32 length and the record,
// written as a checkpoint with valid framing, then loaded into two tables,
// "a" and "b", with the checkpoint's table options (as dm-reverb). A load
// either fails with a status and leaves the tables empty, or restores at
// most the items the checkpoint holds.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cc/checkpointing/checkpointer.h"
#include "cc/checkpointing/record_io.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/uniform.h"
#include "cc/support/varint.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/temp_dir.h"

namespace deepmind::reverb {
namespace {

std::shared_ptr<Table> MakeTable(const std::string& name) {
  return *Table::Create(name, std::make_unique<UniformSelector>(),
                        std::make_unique<FifoSelector>(), /*max_size=*/100,
                        /*max_times_sampled=*/0, *MinSizeRateLimiter(1));
}

void WriteFile(const std::string& path,
               const std::vector<std::string>& records) {
  auto writer = RecordWriter::Create(path, /*zlib_level=*/-1);
  FUZZ_CHECK(writer.ok());
  for (const std::string& record : records) {
    FUZZ_CHECK((*writer)->Write(record).ok());
  }
  FUZZ_CHECK((*writer)->Close().ok());
}

}  // namespace
}  // namespace deepmind::reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepmind::reverb;  // NOLINT(build/namespaces)
  std::vector<std::string> files[3];
  const char* p = reinterpret_cast<const char*>(data);
  const char* const end = p + size;
  while (p < end) {
    const int file = static_cast<unsigned char>(*p++) % 3;
    uint32_t length;
    if (!GetVarint32(&p, end, &length)) break;
    length = std::min<uint32_t>(length, static_cast<uint32_t>(end - p));
    files[file].emplace_back(p, length);
    p += length;
  }
  const auto dir = fuzzing::TempDir() / "checkpoint";
  static const bool made = [&dir] {
    std::filesystem::create_directories(dir);
    std::FILE* done = std::fopen((dir / Checkpointer::kDoneFile).c_str(), "wb");
    return done != nullptr && std::fclose(done) == 0;
  }();
  FUZZ_CHECK(made);
  WriteFile(dir / Checkpointer::kTablesFile, files[0]);
  WriteFile(dir / Checkpointer::kItemsFile, files[1]);
  WriteFile(dir / Checkpointer::kChunksFile, files[2]);

  const std::vector<std::shared_ptr<Table>> tables = {MakeTable("a"),
                                                      MakeTable("b")};
  const Checkpointer checkpointer(fuzzing::TempDir().string());
  const absl::Status status = checkpointer.Load(dir.string(), tables);
  int64_t restored = 0;
  for (const auto& table : tables) {
    restored += table->size();
    FUZZ_CHECK(table->size() <= table->max_size());
    FUZZ_CHECK(static_cast<int64_t>(table->Checkpoint().items.size()) ==
               table->size());
  }
  FUZZ_CHECK(status.ok() ? restored <= static_cast<int64_t>(files[1].size())
                         : restored == 0);
  return 0;
}
