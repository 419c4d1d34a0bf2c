#include "cc/support/buffer_pool.h"

#include <utility>

#include "cc/support/mutex.h"

namespace deepmind::reverb {

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
      if (kept.buffer.capacity() >= size &&
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
    } else {
      buffer.reserve((size + size / 4 + kMinBytes - 1) / kMinBytes * kMinBytes);
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

}  // namespace deepmind::reverb
