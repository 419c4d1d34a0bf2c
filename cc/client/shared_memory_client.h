// SharedMemoryClient: the client's side of a SharedMemorySession with a
// server on its host (the server's side, and the names: see
// cc/service/shared_memory_host.h; docs/wire-protocol.md, "Shared memory").
//
// Start() asks the server for a session and reads its probe: a client that
// can read it is on the server's host, as its user. Then
//  - an insert stream's Writer writes each chunk from min_chunk_bytes() on
//    into a segment of its own directory (one the server freed, if there
//    is one: through the mapping the session keeps of it if it has seen it
//    before, cc/support/segment_mappings.h) and sends the segment's name
//    (the server takes the file over);
//  - a writer may build a chunk's bytes in a segment of the session's
//    build directory in the first place (BuildChunk, built_chunk.h): the
//    Writer then moves it into its own directory and sends that name, with
//    nothing to copy. A link in the build directory stays while the chunk
//    does on this side, so the server does not hand the file to a writer
//    (SegmentPool::Recycle) while this process may still read it. Segments to
//    build in are made ready (taken, sized to whole pages, mapped) by the
//    Writer after it sends a built chunk, so that building one makes no
//    system call on the writer's caller thread; the Writer sizes a
//    segment to its chunk before it sends it;
//  - a sample stream sends the secret with its requests; TakeResponse()
//    takes a response the server wrote into a segment of the stream's in
//    the same way (mapped to be kept: the server reuses its few segments),
//    and TakeChunks()
//    takes the chunks the server lent as segments into the session's own
//    directory and maps them, for the sample to decompress its tensors
//    from (no copy in between); each goes with the sample. A segment met
//    for the first time is mapped to be kept, and its tensors stored
//    uncompressed are read with pread (faulting them in would cost more
//    than the copy); from the next time on, they are copied from the kept
//    mapping.
//
// Shared memory is never required: a server without it (dm-reverb, another
// host, REVERB_SHARED_MEMORY=0 on either side) gets bytes, and a segment
// that cannot be written goes as bytes too.
//
// Thread-safe; a Writer is used by one stream.
#ifndef REVERB_CC_CLIENT_SHARED_MEMORY_CLIENT_H_
#define REVERB_CC_CLIENT_SHARED_MEMORY_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cc/client/sample.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "cc/support/segment_mappings.h"
#include "cc/support/segment_pool.h"
#include "cc/tensor/tensor.h"
#include "reverb/cc/reverb_service.grpc.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT SharedMemoryClient {
 public:
  // The session `stub`'s server offers this process; null if none (no
  // offer, UNIMPLEMENTED from a server without the method, a probe this
  // process cannot read, REVERB_SHARED_MEMORY=0). The call waits at most
  // `timeout` and not for a connection. An error other than those (the
  // server is unreachable) is returned as such.
  static absl::StatusOr<std::shared_ptr<const SharedMemoryClient>> Start(
      ReverbService::StubInterface* stub, absl::Duration timeout);

  const std::string& secret() const { return secret_; }
  int64_t min_chunk_bytes() const { return min_chunk_bytes_; }

  // Writes one insert stream's chunks into segments; removes its directory
  // (what the server has not taken) when it goes.
  class REVERB_EXPORT Writer {
   public:
    explicit Writer(std::shared_ptr<const SharedMemoryClient> session)
        : session_(std::move(session)) {}
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Whether `chunk` (of `size` bytes serialized) should go as a segment.
    bool Wants(size_t size) const {
      return static_cast<int64_t>(size) >= session_->min_chunk_bytes_;
    }
    // Fills `out` to name a segment of `chunk` (whose ChunkWireSize is
    // `size`): the segment a chunk built for this session is in, the first
    // time it is sent, else a new one it is written into. False if it
    // could not (the chunk then goes as bytes).
    bool Write(const std::shared_ptr<const ChunkData>& chunk, size_t size,
               SharedMemoryChunk* out);
    // Makes segments ready to build chunks in, one for each built chunk
    // Write has named since the last call (see PrepareSegment), once their
    // request is encoded (see InsertStream::Then).
    void MakeNextReady();

   private:
    // The next name in the stream's directory (made the first time); empty
    // if it cannot be made.
    std::string NextName();

    const std::shared_ptr<const SharedMemoryClient> session_;
    std::string dir_;  // Made by the first NextName().
    int64_t written_ = 0;
    // The sizes of the built chunks named since the last MakeNextReady().
    std::vector<size_t> sent_built_;
  };

  // A chunk of `header` (one tensor without its content) and a content of
  // `content_size` bytes, which `fill` writes where it is given, built in a
  // new segment of the session's build directory (see built_chunk.h); null
  // if no segment could be made (the caller then builds it in memory).
  std::shared_ptr<const ChunkData> BuildChunk(
      ChunkData header, size_t content_size,
      absl::FunctionRef<void(char*)> fill) const;

  // The chunk of `header` (every field but its tensor) and one tensor of
  // `rows`, built with BuildChunk if `rows` are numeric, of
  // min_chunk_bytes() or more and stored as they are (StoredWithoutTrying,
  // cc/tensor/compression.h): the tensor's content is then the stored
  // stream of them, as CompressTensorAsProto makes it. Else null.
  std::shared_ptr<const ChunkData> BuildStoredChunk(
      ChunkData header, const TensorView& rows) const;

  // Adds the chunks the entries of `response` hold as segments
  // (`shared_data`) to their `data`, without their tensors' contents,
  // which `held` gets (ParseChunkHeader, cc/core/chunk.h): each segment is
  // moved into this session's directory, mapped, and removed when the
  // pieces `held` keeps of it go.
  // INVALID_ARGUMENT if a name is not one the server may lend, or a
  // segment does not hold a chunk; CANCELLED if it is gone (the call has
  // ended). Not thread-safe for one `response`.
  absl::Status TakeChunks(SampleStreamResponse* response,
                          HeldChunkContents* held) const;

  // The bytes of the response `shared` names (a segment the server lent,
  // see shared_memory_host.h), for DecodeSampleResponse: the segment is
  // moved into this session's directory, mapped, and removed once the
  // bytes' last copy goes. The errors of TakeChunks; INVALID_ARGUMENT too
  // if the segment is shorter than `shared.size()`.
  absl::StatusOr<absl::Cord> TakeResponse(
      const SharedMemoryResponse& shared) const;

 private:
  // A directory of the session's: removed once the session and every
  // mapping or chunk of its segments are gone.
  struct OwnedDir {
    std::string name;
    ~OwnedDir();
  };

  // A segment of the build directory to build a chunk in: `pages` whole
  // pages, mapped.
  struct ReadySegment {
    std::string name;
    std::shared_ptr<char> mapping;
    size_t pages = 0;
  };

  // Moves `lent` (a name the server lent, of a `what`) into the session's
  // directory (its name there into `taken`, if not null) and maps it
  // (MapKeptSegment: `met` as its `kept`); the link is removed once the
  // bytes' last copy goes. Errors: see TakeChunks.
  absl::StatusOr<absl::Cord> TakeLent(absl::string_view lent,
                                      absl::string_view what,
                                      std::string* taken, bool* met) const;

  // The build directory (made the first time; null if it cannot be) and
  // the next name in it.
  std::shared_ptr<OwnedDir> BuildDirLocked(std::string* name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(build_mu_);
  // A new segment of `pages` pages in the build directory, into
  // `segment`; false if none could be made.
  bool MakeReady(size_t pages, ReadySegment* segment) const
      ABSL_LOCKS_EXCLUDED(build_mu_);
  // Makes a segment ready for a chunk of `size` bytes unless
  // kMaxReadySegments or kMaxReadyBytes are (the Writer, after sending a
  // built chunk).
  void PrepareSegment(size_t size) const ABSL_LOCKS_EXCLUDED(build_mu_);
  static constexpr int kMaxReadySegments = 2;
  static constexpr size_t kMaxReadyBytes = size_t{16} << 20;

  SharedMemoryClient(std::string prefix, std::string secret,
                     int64_t min_chunk_bytes, std::shared_ptr<OwnedDir> reader)
      : prefix_(std::move(prefix)),
        secret_(std::move(secret)),
        min_chunk_bytes_(min_chunk_bytes),
        free_(absl::StrCat(prefix_, ".free")),
        reader_(std::move(reader)) {}

  // The mappings kept of the segments writers write and samplers read
  // (cc/support/segment_mappings.h): each spans at most 1 GiB of address
  // space (the memory is the server's files').
  static SegmentMappings::Options WriterMappings() {
    SegmentMappings::Options options;
    options.writable = true;
    options.lasting_names = true;
    return options;
  }

  const std::string prefix_;
  const std::string secret_;
  const int64_t min_chunk_bytes_;
  mutable SegmentMappings write_mappings_{WriterMappings()};
  mutable SegmentMappings read_mappings_{SegmentMappings::Options()};
  // The server's free segments, which writers take.
  mutable SegmentPool free_;
  // The segments samplers have taken.
  const std::shared_ptr<OwnedDir> reader_;
  mutable std::atomic<int64_t> next_read_{0};
  // The segments BuildChunk built: made by its first call.
  mutable Mutex build_mu_;
  mutable std::shared_ptr<OwnedDir> build_ ABSL_GUARDED_BY(build_mu_);
  mutable int64_t next_built_ ABSL_GUARDED_BY(build_mu_) = 0;
  mutable std::vector<ReadySegment> ready_ ABSL_GUARDED_BY(build_mu_);
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SHARED_MEMORY_CLIENT_H_
