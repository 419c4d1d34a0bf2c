// A directory of the fuzz process's own for targets that read files, on
// /dev/shm where there is one (files are written for every input), removed
// at exit.
#ifndef REVERB_FUZZ_TEMP_DIR_H_
#define REVERB_FUZZ_TEMP_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace deepmind::reverb::fuzzing {

inline const std::filesystem::path& TempDir() {
  static const auto* const dir = [] {
    namespace fs = std::filesystem;
    std::error_code error;
    const fs::path base = fs::is_directory("/dev/shm", error)
                              ? fs::path("/dev/shm")
                              : fs::temp_directory_path();
    auto* path =
        new fs::path(base / ("reverb_fuzz_" + std::to_string(::getpid())));
    fs::remove_all(*path, error);
    fs::create_directories(*path);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(TempDir(), ignored);
    });
    return path;
  }();
  return *dir;
}

}  // namespace deepmind::reverb::fuzzing

#endif  // REVERB_FUZZ_TEMP_DIR_H_
