// SegmentPool: a directory of free shared-memory segments (a server's
// P.free, cc/service/shared_memory_host.h) as one process sees it. The
// server recycles the files of chunks that are gone into it (Recycle);
// writers take files out of it to write their next chunks in (Take), which
// spares the kernel allocating and zeroing fresh pages for every chunk.
//
// Files are named "<pages>-<n>": how many memory pages each takes, so that
// a taker finds one of the size it needs, and the pool's bytes are known,
// from a listing alone.
//
// Several processes share the directory, so what it holds is read from it,
// but not at every call (a listing is five system calls, against the one
// rename that moves a file):
//  - Take works through the names of its last listing and lists the
//    directory again only once they have run out. A name another writer
//    took meanwhile (or the server removed as idle) fails to move and is
//    passed over.
//  - Recycle counts, from its last listing on, the files and pages it
//    added; only its process adds to the pool (takers only remove), so that
//    is a bound on what the pool holds. It lists the directory again only
//    when the bound would pass max_files or max_bytes.
//
// Thread-safe.
#ifndef REVERB_CC_SUPPORT_SEGMENT_POOL_H_
#define REVERB_CC_SUPPORT_SEGMENT_POOL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

class REVERB_EXPORT SegmentPool {
 public:
  // The pool in directory `dir` (a name under /dev/shm, see shm_segment.h),
  // holding at most `max_files` files and `max_bytes` of pages (the bounds
  // Recycle keeps; a process that only takes needs none).
  explicit SegmentPool(std::string dir, int max_files = 0,
                       size_t max_bytes = 0);

  const std::string& dir() const { return dir_; }

  // Moves a file of the pool to `name` (a path under /dev/shm that must
  // not exist), one of `pages` pages if the pool has one; false if it has
  // none. The file holds whatever it held (a chunk that is gone).
  bool Take(absl::string_view name, size_t pages);

  // Moves segment `name` into the pool as "<pages>-<file>" if nothing else
  // links to it (no reader may still be reading it) and the pool, with it,
  // holds at most max_files files and max_bytes of pages; else removes it.
  void Recycle(absl::string_view name, absl::string_view file);

 private:
  const std::string dir_;
  const int max_files_;
  const size_t max_bytes_;

  Mutex mu_;
  // Take: the names of the last listing not tried yet.
  std::vector<std::string> listed_ ABSL_GUARDED_BY(mu_);
  // Recycle: bounds on the files and pages the pool holds; negative before
  // the first listing.
  int files_ ABSL_GUARDED_BY(mu_) = -1;
  size_t pages_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_SEGMENT_POOL_H_
