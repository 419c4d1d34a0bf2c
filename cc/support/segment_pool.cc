#include "cc/support/segment_pool.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cc/support/pages.h"
#include "cc/support/shm_segment.h"

namespace deepmind::reverb {
namespace {

// The pages of a pool's file, named "<pages>-<n>"; 0 for another name.
size_t PagesInName(absl::string_view file) {
  size_t pages = 0;
  const size_t dash = file.find('-');
  if (dash == absl::string_view::npos ||
      !absl::SimpleAtoi(file.substr(0, dash), &pages)) {
    return 0;
  }
  return pages;
}

}  // namespace

SegmentPool::SegmentPool(std::string dir, int max_files, size_t max_bytes)
    : dir_(std::move(dir)), max_files_(max_files), max_bytes_(max_bytes) {}

bool SegmentPool::Take(absl::string_view name, size_t pages) {
  const std::string path = SegmentPath(name);
  bool listed_now = false;
  while (true) {
    std::string file;
    {
      MutexLock lock(&mu_);
      if (listed_.empty()) {
        if (listed_now) return false;
        listed_ = ListSegments(dir_);
        listed_now = true;
        if (listed_.empty()) return false;
      }
      // One of as many pages first: resizing another frees or adds pages.
      auto it = std::find_if(listed_.begin(), listed_.end(),
                             [pages](const std::string& listed) {
                               return PagesInName(listed) == pages;
                             });
      if (it == listed_.end()) it = listed_.begin();
      file = std::move(*it);
      listed_.erase(it);
    }
    // Another writer may have taken it first: then rename fails.
    if (rename(SegmentPath(absl::StrCat(dir_, "/", file)).c_str(),
               path.c_str()) == 0) {
      return true;
    }
  }
}

void SegmentPool::Recycle(absl::string_view name, absl::string_view file) {
  const std::string path = SegmentPath(name);
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && info.st_nlink == 1) {
    const size_t pages = PagesOf(info.st_size);
    bool room;
    {
      MutexLock lock(&mu_);
      auto fits = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return files_ >= 0 && files_ < max_files_ &&
               (pages_ + pages) * PageSize() <= max_bytes_;
      };
      if (!fits()) {
        const std::vector<std::string> files = ListSegments(dir_);
        files_ = static_cast<int>(files.size());
        pages_ = 0;
        for (const std::string& other : files) pages_ += PagesInName(other);
      }
      room = fits();
      if (room) {
        ++files_;
        pages_ += pages;
      }
    }
    if (room &&
        rename(
            path.c_str(),
            SegmentPath(absl::StrCat(dir_, "/", pages, "-", file)).c_str()) ==
            0) {
      return;
    }
  }
  unlink(path.c_str());
}

}  // namespace deepmind::reverb
