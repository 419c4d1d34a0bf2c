// SegmentMappings: mappings of shared-memory segment files kept from one use
// of a file to the next, so that a file seen again is written or read with a
// plain copy.
//
// A server hands the files of freed chunks back to writers (its pool:
// cc/support/shm_segment.h), and lends the files of its chunks to samplers
// again and again, so each process meets the same files many times. pwrite
// and pread look up and lock each 4 KiB page of a /dev/shm file: measured
// here, 70 us to write 1 MiB (115 us to read it, out of cache) against 21 us
// (44 us) to copy it through a mapping whose pages are mapped already. So a
// file is mapped (Keep) the first time it is met, and copied through that
// mapping from the next time on (Find); its pages are faulted in once.
//
// A kept mapping keeps its file's memory even once every name of the file is
// gone (the server removed it). So, while any mapping is kept, a thread of
// its own drops each second those not found for `max_idle`, and, where
// files are opened by a name that stays theirs while they live (a writer's:
// the server renames its segments, never links them anew), those of files
// removed. A sampler opens the link the server lent it and removes it after
// use, so its mappings go by time alone. At most `max_bytes` are mapped; the
// least recently found go first. The pages mapped count in the process's
// RSS (as shared memory: the server's files, not more memory).
//
// Thread-safe. A file is written by one thread at a time (a segment belongs
// to one writer until it is sent).
#ifndef REVERB_CC_SUPPORT_SEGMENT_MAPPINGS_H_
#define REVERB_CC_SUPPORT_SEGMENT_MAPPINGS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

class REVERB_EXPORT SegmentMappings {
 public:
  struct Options {
    size_t max_bytes = size_t{1} << 30;
    absl::Duration max_idle = absl::Seconds(10);
    // Mapped to be written (files opened for reading and writing), else
    // read-only.
    bool writable = false;
    // Files are opened by the name that stays theirs while they live.
    bool lasting_names = false;
  };
  explicit SegmentMappings(const Options& options) : options_(options) {}
  // Stops the thread. Mappings found stay until their pointers go.
  ~SegmentMappings();

  SegmentMappings(const SegmentMappings&) = delete;
  SegmentMappings& operator=(const SegmentMappings&) = delete;

  // The kept mapping of open file `fd`, `size` bytes long, if there is one
  // that spans them (a file shrunk since it was mapped is found; one grown
  // is not) and every page of the file is allocated (a copy into a hole of
  // a full /dev/shm would fault); else null. It stays mapped while the
  // pointer lives; only its first `size` bytes may be touched.
  std::shared_ptr<char> Find(int fd, size_t size);

  // Maps file `fd` (`size` bytes long, every page allocated) to be found
  // next time; returns the mapping (null if it could not be mapped or is
  // larger than max_bytes). Its pages are faulted in if it is writable (a
  // writer writes them all), else not.
  std::shared_ptr<char> Keep(int fd, size_t size);

  // How many files are mapped.
  int size() const;

  // Drops the mappings not found for max_idle, and with lasting_names those
  // of files removed (the thread does it once a second).
  void DropStale();

 private:
  struct Mapping;
  using FileId = std::pair<dev_t, ino_t>;

  void Sweep();  // The thread.

  const Options options_;
  mutable Mutex mu_;
  absl::flat_hash_map<FileId, std::shared_ptr<Mapping>> mappings_
      ABSL_GUARDED_BY(mu_);
  size_t mapped_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t finds_ ABSL_GUARDED_BY(mu_) = 0;  // For least recently found.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sweeper_;  // Started by the first Keep(); under mu_.
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_SEGMENT_MAPPINGS_H_
