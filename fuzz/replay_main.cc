// The main of a fuzz target's replay test: runs LLVMFuzzerTestOneInput on
// every file under the paths given (files, or directories read
// recursively; a missing directory holds no inputs), as libFuzzer runs an
// input. Exits 0 after the last one; a failing input aborts (FUZZ_CHECK) or
// is reported by a sanitizer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Replay(const std::filesystem::path& path, int* count) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replaying %s\n", path.c_str());
  // A copy of exactly its size, so that reading past it is caught.
  const std::vector<uint8_t> input(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(input.data(), input.size());
  ++*count;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path path(argv[i]);
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::recursive_directory_iterator(path)) {
        if (entry.is_regular_file()) Replay(entry.path(), &count);
      }
    } else if (fs::exists(path)) {
      Replay(path, &count);
    }
  }
  std::fprintf(stderr, "%d inputs replayed\n", count);
  return 0;
}
