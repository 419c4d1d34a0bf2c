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
//  - a sample stream sends the secret with its requests, and TakeChunks()
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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cc/client/sample.h"
#include "cc/support/export.h"
#include "cc/support/segment_mappings.h"
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
    // Writes `chunk` (whose ByteSizeLong() is `size`) into a new segment
    // and fills `out` to name it; false if it could not (the chunk then
    // goes as bytes).
    bool Write(const ChunkData& chunk, size_t size, SharedMemoryChunk* out);

   private:
    const std::shared_ptr<const SharedMemoryClient> session_;
    std::string dir_;  // Made by the first Write().
    int64_t written_ = 0;
  };

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

 private:
  // The directory of the segments samplers have taken: removed once the
  // session and every mapping of them are gone.
  struct ReaderDir {
    std::string name;
    ~ReaderDir();
  };

  SharedMemoryClient(std::string prefix, std::string secret,
                     int64_t min_chunk_bytes, std::shared_ptr<ReaderDir> reader)
      : prefix_(std::move(prefix)),
        secret_(std::move(secret)),
        min_chunk_bytes_(min_chunk_bytes),
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
  const std::shared_ptr<ReaderDir> reader_;
  mutable std::atomic<int64_t> next_read_{0};
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SHARED_MEMORY_CLIENT_H_
