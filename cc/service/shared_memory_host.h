// SharedMemoryHost: the server's side of shared-memory transport with
// clients on its host (docs/wire-protocol.md, "Shared memory").
//
// Session: a client asks SharedMemorySession with its pid and pid
// namespace. A client of the server's pid namespace (whose liveness the
// server can check) gets the name of the probe file, a file readable by the
// server's user only that holds a random secret, the prefix of the server's
// names and the size from which chunks go as segments. A client that can
// read the probe is on this host, as this user: it sends the secret with
// each segment, and with its sample requests to get segments back.
//
// Names under /dev/shm (P = the prefix, "reverb-<pid>-<pid ns>-<token>"):
//   P.probe            the secret;
//   P.chunks/<n>       the segments the tables' chunks are mapped from;
//   P.free/<p>-<n>     segments of chunks that are gone (of <p> pages), for
//                      writers to reuse (at most kMaxFreeSegments and
//                      kMaxFreeBytes; one no writer takes within
//                      kFreeSegmentIdleTime is removed);
//   P.w<pid>-<token>/  a writer's segments (one directory per insert
//                      stream, made by the client: <pid> is its own);
//   P.s<n>/            segments lent to one sample stream (P.s<n>/<m>),
//                      and the stream's own response segments (o<k>);
//   P.r<pid>-<token>/  links a client has taken out of P.s<n>/ (one
//                      directory per session, made by the client), each
//                      removed once it has read the chunk.
//
// Inserts: Accept() takes a writer's segment by moving it into P.chunks and
// mapping it; the chunk keeps the mapping (no copy). The host keeps its
// mappings of the files it meets (cc/support/segment_mappings.h): a file
// writers reuse comes back mapped, its pages too. When the last item
// referring to it goes, the file moves to P.free if nothing else links to
// it (no sampler is reading it) and P.free has room, else it is removed: a
// writer takes a free segment before it makes a new one (one of as many
// pages first), which spares the kernel zeroing fresh pages for every chunk
// (resizing one frees or adds pages). A thread of the host looks
// at P.free every kFreeSegmentIdleTime and removes what it saw there the
// last time: a server whose writers pause holds no more than its chunks.
// Samples: a Lender hard-links a chunk's file into its stream's directory
// (no copy); the client moves the link into its own directory, maps it and
// removes it once it has read the chunk. A file with a link besides its
// chunk's is never reused (a reader may be reading it). A response of
// kMinResponseBytes or more (chunks kept in memory: frames, small samples)
// is copied into a segment of the stream's own, P.s<n>/o<k>, lent the same
// way instead of crossing the socket: one copy where the kernel makes two.
// The Lender writes into one only while its own link is the file's only one
// (the client has read the response), so a stream reuses its few segments
// and their mappings, and writes bytes when all of them are out.
//
// Leaks: an insert stream's directory goes when the stream ends, a sample
// stream's with its Lender, and then those of clients whose process is gone
// (a client killed while writing or reading); the thread that trims P.free
// removes those too (a stream's end may be seen before its killed process
// is gone); everything goes with the host; and what a killed server left is
// swept by the next host made on the machine (SweepDeadServers).
//
// Thread-safe.
#ifndef REVERB_CC_SERVICE_SHARED_MEMORY_HOST_H_
#define REVERB_CC_SERVICE_SHARED_MEMORY_HOST_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cc/core/chunk.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "cc/support/segment_mappings.h"
#include "cc/support/segment_pool.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT SharedMemoryHost {
 public:
  // Chunks from this size on go as segments unless the environment
  // variable REVERB_SHARED_MEMORY_MIN_BYTES says otherwise.
  static constexpr int64_t kDefaultMinChunkBytes = 128 << 10;
  // A sample response from this size on goes as a segment of its stream's.
  static constexpr size_t kMinResponseBytes = 128 << 10;
  // Segments each stream writes responses into, at most; each is sized to
  // the largest response written into it, in steps of this.
  static constexpr int kMaxResponseSegments = 8;
  static constexpr size_t kResponseSegmentStep = size_t{1} << 20;
  // Free segments kept for writers to reuse, at most: files and bytes. A
  // writer takes a segment per chunk before the server frees the chunks its
  // items evict, so the pool must cover the chunks a writer has in flight:
  // once it runs dry, each chunk costs a fresh file (zeroed pages, a new
  // mapping), and the segments freed later beyond the bound are removed. A
  // writer never flushed runs 40-90 chunks of 1 MiB ahead here; with 32
  // files its inserts ran 17% slower (bench: 1 MiB inserts one at a time).
  static constexpr int kMaxFreeSegments = 256;
  static constexpr size_t kMaxFreeBytes = size_t{256} << 20;
  // A free segment is removed after one to two of these untaken.
  static constexpr absl::Duration kFreeSegmentIdleTime = absl::Seconds(5);

  // Sweeps what dead servers left, then makes the probe and the chunk
  // directory. Null if shared memory is turned off (REVERB_SHARED_MEMORY=0)
  // or /dev/shm cannot be used (the reason is logged).
  static std::unique_ptr<SharedMemoryHost> Create();
  // Stops the trimming thread and removes every name of the host's. Chunks
  // mapped stay readable.
  ~SharedMemoryHost();

  const std::string& prefix() const { return prefix_; }

  // The answer to SharedMemorySession.
  SharedMemorySessionResponse Offer(
      const SharedMemorySessionRequest& request) const;

  // Whether `secret` is this host's.
  bool SecretMatches(absl::string_view secret) const;

  // The chunk in writer segment `chunk` (see above), or INVALID_ARGUMENT
  // (a wrong secret or name, not a chunk) or NOT_FOUND (no such segment).
  // `writer_dirs` gains the segment's directory if it is new to it.
  absl::StatusOr<std::shared_ptr<Chunk>> Accept(
      const SharedMemoryChunk& chunk, std::vector<std::string>* writer_dirs);

  // Removes `dirs` (an ended stream's), and the directories of clients
  // (P.w..., P.r...) whose process is gone.
  void ForgetStream(const std::vector<std::string>& dirs) const;

  // Lends chunks to one sample stream; removes what it lent and the client
  // has not taken when it goes.
  class REVERB_EXPORT Lender {
   public:
    explicit Lender(SharedMemoryHost* host) : host_(host) {}
    ~Lender();
    Lender(const Lender&) = delete;
    Lender& operator=(const Lender&) = delete;

    // The name of a new link to `chunk`'s segment (which it must have), or
    // empty if it could not be made (the chunk then goes as bytes).
    std::string Lend(const Chunk& chunk);

    // The name of a new link to a segment of the stream's own whose first
    // `size` bytes `fill` has written (a response: see above), or empty if
    // there is none to write (the response then goes as bytes).
    std::string LendResponse(size_t size, absl::FunctionRef<void(char*)> fill);

   private:
    // A segment responses are written into: P.s<n>/o<k>, mapped.
    struct ResponseSegment {
      std::string name;
      int fd = -1;
      char* mapping = nullptr;
      size_t size = 0;  // Of the file and of the mapping.
    };

    // Whether the stream's directory exists (made the first time).
    bool MakeDir();
    // Sizes `segment` to `size` bytes (a new one too), its pages allocated,
    // and maps it; false if it could not (it is then unusable).
    static bool Resize(ResponseSegment* segment, size_t size);

    SharedMemoryHost* const host_;
    std::string dir_;  // Made on the first Lend() or LendResponse().
    int64_t lent_ = 0;
    std::vector<ResponseSegment> responses_;
  };

 private:
  SharedMemoryHost(std::string prefix, std::string secret,
                   int64_t min_chunk_bytes);

  // The trimming thread's loop (see above), until stopping_.
  void TrimIdleFreeSegments();
  // Removes the directories of clients whose process is gone.
  void SweepDeadClients() const;

  const std::string prefix_;
  const std::string secret_;
  const int64_t min_chunk_bytes_;
  const uint64_t pid_namespace_;
  // Of the files accepted (the name a writer sends stays the file's while
  // it lives: the host renames it, never links it anew).
  SegmentMappings mappings_{[] {
    SegmentMappings::Options options;
    options.lasting_names = true;
    return options;
  }()};
  // P.free: shared with the chunks' releasers, which may outlive the host.
  const std::shared_ptr<SegmentPool> free_;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int64_t> next_lender_{0};
  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread trimmer_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SHARED_MEMORY_HOST_H_
