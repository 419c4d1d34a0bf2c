#include "cc/support/buffer_pool.h"

#include <sys/mman.h>

#include <cstdint>
#include <utility>

#include "cc/support/mutex.h"

namespace deepmind::reverb {
namespace {

// Asks for transparent huge pages on the 2 MiB-aligned part of a new
// buffer's memory (a hint: the kernel may have none, or THP may be off).
void AdviseHugePages(std::string* buffer) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHugePage = 2 << 20;
  const auto begin = reinterpret_cast<uintptr_t>(buffer->data());
  const uintptr_t end = begin + buffer->capacity();
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = end & ~(kHugePage - 1);
  if (last > first) {
    madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
#endif
}

}  // namespace

BufferPool& BufferPool::Default() {
  static BufferPool* pool = new BufferPool();
  return *pool;
}

std::string BufferPool::Take(size_t size) {
  std::string buffer = TakeKept(size);
  // Within the capacity: no reallocation, and only bytes beyond the
  // buffer's previous size are zeroed.
  buffer.resize(size);
  return buffer;
}

std::string BufferPool::Reserve(size_t capacity) {
  std::string buffer = TakeKept(capacity);
  buffer.clear();  // Keeps the capacity.
  buffer.reserve(capacity);
  return buffer;
}

std::string BufferPool::TakeKept(size_t size) {
  std::string buffer;
  if (size >= kMinBytes) {
    MutexLock lock(&mu_);
    DropIdleLocked(absl::Now());
    Kept* best = nullptr;
    for (Kept& kept : kept_) {
      const size_t capacity = kept.buffer.capacity();
      if (capacity >= size && capacity / 4 <= size &&
          (best == nullptr ||
           kept.buffer.capacity() < best->buffer.capacity())) {
        best = &kept;
      }
    }
    if (best != nullptr) {
      buffer = std::move(best->buffer);
      *best = std::move(kept_.back());
      kept_.pop_back();
      kept_bytes_ -= buffer.capacity();
      ++reused_;
    } else {
      buffer.reserve((size + size / 4 + kMinBytes - 1) / kMinBytes * kMinBytes);
      if (buffer.capacity() >= kHugePageMinBytes) AdviseHugePages(&buffer);
    }
  }
  return buffer;
}

void BufferPool::Give(std::string buffer) {
  const size_t bytes = buffer.capacity();
  if (bytes < kMinBytes) return;
  MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  DropIdleLocked(now);
  if (kept_bytes_ + bytes > kMaxBytes) return;
  kept_bytes_ += bytes;
  ++given_kept_;
  kept_.push_back({std::move(buffer), now});
}

void BufferPool::DropIdleLocked(absl::Time now) {
  for (size_t i = 0; i < kept_.size();) {
    if (now - kept_[i].since <= max_idle_) {
      ++i;
      continue;
    }
    kept_bytes_ -= kept_[i].buffer.capacity();
    kept_[i] = std::move(kept_.back());
    kept_.pop_back();
  }
}

size_t BufferPool::kept_bytes() const {
  MutexLock lock(&mu_);
  return kept_bytes_;
}

int64_t BufferPool::reused() const {
  MutexLock lock(&mu_);
  return reused_;
}

int64_t BufferPool::given_kept() const {
  MutexLock lock(&mu_);
  return given_kept_;
}

}  // namespace deepmind::reverb
