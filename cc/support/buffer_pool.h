// BufferPool: recycles the large byte buffers of step data.
//
// A writer of large steps makes up to two buffers of the step's size per
// step (the chunker's buffer of steps waiting for their chunk, and the
// compressed bytes, which the chunk keeps until the server confirms it). Fresh
// buffers of a megabyte come from mmap (or a trimmed heap) and fault in every
// page on first write: for 1 MiB steps that cost about as much as everything
// else. The pool keeps such buffers when they are done with and hands them out
// again, already backed by memory.
//
// Samplers take their batches' and decompressed tensors' buffers from the
// pool too, and numpy arrays made of them (python/bindings) give them back
// when they are freed: a learner's next batch lands in pages it has already
// faulted in. New buffers of kHugePageMinBytes or more ask the kernel for
// transparent huge pages (madvise), so that their first use faults in one
// page per 2 MiB, not per 4 KiB.
//
// Only buffers of at least kMinBytes are kept, at most kMaxBytes in all,
// and none for longer than `max_idle` (checked whenever the pool is used):
// a process that stops writing large steps gets its memory back. A kept
// buffer serves requests of at least a quarter of its capacity (less is a
// new buffer), so that a batch's buffer does not end up holding one step.
// Thread-safe.
#ifndef REVERB_CC_SUPPORT_BUFFER_POOL_H_
#define REVERB_CC_SUPPORT_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

class REVERB_EXPORT BufferPool {
 public:
  static constexpr size_t kMinBytes = 64 << 10;
  static constexpr size_t kMaxBytes = 256 << 20;
  static constexpr size_t kHugePageMinBytes = 4 << 20;

  explicit BufferPool(absl::Duration max_idle = absl::Seconds(1))
      : max_idle_(max_idle) {}

  // The process's pool.
  static BufferPool& Default();

  // A string of `size` bytes, with unspecified contents: the smallest kept
  // buffer large enough, else a new one with a quarter more capacity (so
  // that a step's buffer can later take its compressed bytes).
  std::string Take(size_t size);

  // An empty string to append `capacity` bytes to: a kept buffer as for
  // Take, or a new one (of exactly that capacity if it is small).
  std::string Reserve(size_t capacity);

  // Keeps `buffer` for a later Take or Reserve, if it is large enough and
  // the pool has room; otherwise frees it.
  void Give(std::string buffer);

  // Bytes (capacities) of the buffers kept.
  size_t kept_bytes() const;
  // Calls of Take and Reserve served by a kept buffer, and buffers given
  // back and kept, since the pool was made.
  int64_t reused() const;
  int64_t given_kept() const;

 private:
  struct Kept {
    std::string buffer;
    absl::Time since;
  };
  // The smallest kept buffer of at least `size` bytes, taken out of the
  // pool, or a new one with a quarter more capacity; an empty string if
  // `size` is below kMinBytes.
  std::string TakeKept(size_t size);
  // Frees the buffers kept for longer than max_idle_.
  void DropIdleLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration max_idle_;
  mutable Mutex mu_;
  std::vector<Kept> kept_ ABSL_GUARDED_BY(mu_);
  size_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reused_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t given_kept_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_BUFFER_POOL_H_
