#include "cc/support/segment_mappings.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cc/support/pages.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {
namespace {

// The start addresses of this process's mappings of files whose every name
// is gone: /proc/self/maps marks them " (deleted)".
absl::flat_hash_set<uintptr_t> MappingsOfRemovedFiles() {
  absl::flat_hash_set<uintptr_t> starts;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (!absl::EndsWith(line, " (deleted)")) continue;
    const size_t dash = line.find('-');
    uintptr_t start;
    if (dash != std::string::npos &&
        absl::SimpleHexAtoi(absl::string_view(line).substr(0, dash), &start)) {
      starts.insert(start);
    }
  }
  return starts;
}

}  // namespace

struct SegmentMappings::Mapping {
  char* address;
  size_t length;  // Whole pages.
  // Guarded by the owner's mu_.
  uint64_t last_found = 0;  // For the least recently found.
  absl::Time found_at;
  ~Mapping() { munmap(address, length); }
};

SegmentMappings::~SegmentMappings() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
}

std::shared_ptr<char> SegmentMappings::Find(int fd, size_t size) {
  struct stat info;
  if (fstat(fd, &info) != 0) return nullptr;
  const size_t length = PagesOf(size) * PageSize();
  // Every page allocated (st_blocks counts 512-byte blocks).
  if (static_cast<size_t>(info.st_blocks) * 512 < length) return nullptr;
  MutexLock lock(&mu_);
  auto it = mappings_.find(FileId(info.st_dev, info.st_ino));
  if (it == mappings_.end() || it->second->length < length) return nullptr;
  it->second->last_found = ++finds_;
  it->second->found_at = absl::Now();
  return std::shared_ptr<char>(it->second, it->second->address);
}

std::shared_ptr<char> SegmentMappings::Keep(int fd, size_t size) {
  const size_t length = PagesOf(size) * PageSize();
  struct stat info;
  if (length > options_.max_bytes || fstat(fd, &info) != 0) return nullptr;
  void* address = mmap(
      nullptr, length, options_.writable ? PROT_READ | PROT_WRITE : PROT_READ,
      // A writer writes every page: faulted in at once.
      MAP_SHARED | (options_.writable ? MAP_POPULATE : 0), fd, 0);
  if (address == MAP_FAILED) return nullptr;
  auto mapping = std::make_shared<Mapping>();
  mapping->address = static_cast<char*>(address);
  mapping->length = length;
  std::vector<std::shared_ptr<Mapping>> dropped;  // Unmapped unlocked.
  MutexLock lock(&mu_);
  mapping->last_found = ++finds_;
  mapping->found_at = absl::Now();
  std::shared_ptr<Mapping>& slot = mappings_[FileId(info.st_dev, info.st_ino)];
  if (slot != nullptr) {
    mapped_bytes_ -= slot->length;
    dropped.push_back(std::move(slot));
  }
  slot = mapping;
  mapped_bytes_ += length;
  while (mapped_bytes_ > options_.max_bytes) {
    auto oldest = mappings_.begin();
    for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
      if (it->second->last_found < oldest->second->last_found) oldest = it;
    }
    mapped_bytes_ -= oldest->second->length;
    dropped.push_back(std::move(oldest->second));
    mappings_.erase(oldest);
  }
  if (!sweeper_.joinable()) {
    sweeper_ = std::thread([this] { Sweep(); });
    SetThreadName(sweeper_, "reverb-shm-maps");
  }
  return std::shared_ptr<char>(mapping, mapping->address);
}

int SegmentMappings::size() const {
  MutexLock lock(&mu_);
  return static_cast<int>(mappings_.size());
}

void SegmentMappings::DropStale() {
  absl::flat_hash_set<uintptr_t> removed;
  if (options_.lasting_names) removed = MappingsOfRemovedFiles();
  const absl::Time idle_since = absl::Now() - options_.max_idle;
  std::vector<std::shared_ptr<Mapping>> dropped;  // Unmapped unlocked.
  MutexLock lock(&mu_);
  for (auto it = mappings_.begin(); it != mappings_.end();) {
    auto next = std::next(it);
    const Mapping& mapping = *it->second;
    if (mapping.found_at < idle_since ||
        removed.contains(reinterpret_cast<uintptr_t>(mapping.address))) {
      mapped_bytes_ -= mapping.length;
      dropped.push_back(std::move(it->second));
      mappings_.erase(it);
    }
    it = next;
  }
}

void SegmentMappings::Sweep() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(1))) {
        return;
      }
      if (mappings_.empty()) continue;
    }
    DropStale();
  }
}

}  // namespace deepmind::reverb
