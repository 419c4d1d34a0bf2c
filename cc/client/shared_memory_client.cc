#include "cc/client/shared_memory_client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cc/core/chunk.h"
#include "cc/support/shm_segment.h"
#include "cc/support/status_macros.h"
#include "cc/wire/chunk_encoding.h"
#include "cc/wire/grpc_status.h"
#include "grpcpp/client_context.h"

namespace deepmind::reverb {
namespace {

bool Digits(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Whether `name` is "<prefix>.s<n>/<m>", a name the server lends under.
bool LentName(absl::string_view name, absl::string_view prefix) {
  if (!absl::ConsumePrefix(&name, prefix) ||
      !absl::ConsumePrefix(&name, ".s")) {
    return false;
  }
  const size_t slash = name.find('/');
  return slash != absl::string_view::npos && Digits(name.substr(0, slash)) &&
         Digits(name.substr(slash + 1));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SharedMemoryClient>>
SharedMemoryClient::Start(ReverbService::StubInterface* stub,
                          absl::Duration timeout) {
  if (!SharedMemoryAllowed()) return nullptr;
  grpc::ClientContext context;
  context.set_wait_for_ready(false);
  if (timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  SharedMemorySessionRequest request;
  request.set_pid(getpid());
  request.set_pid_namespace(PidNamespace());
  SharedMemorySessionResponse response;
  const grpc::Status status =
      stub->SharedMemorySession(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return nullptr;
  if (!status.ok()) return FromGrpcStatus(status);
  if (response.probe().empty() || response.min_chunk_bytes() <= 0) {
    return nullptr;
  }
  auto probe = OpenSegmentFile(response.probe());
  if (!probe.ok()) return nullptr;  // Another host, or another user.
  std::string secret(probe->size, '\0');
  if (pread(probe->fd, secret.data(), secret.size(), 0) !=
      static_cast<ssize_t>(secret.size())) {
    return nullptr;
  }
  auto reader = std::make_shared<ReaderDir>();
  reader->name =
      absl::StrCat(response.prefix(), ".r", getpid(), "-", RandomToken());
  if (mkdir(SegmentPath(reader->name).c_str(), 0700) != 0) return nullptr;
  return std::shared_ptr<const SharedMemoryClient>(
      new SharedMemoryClient(response.prefix(), std::move(secret),
                             response.min_chunk_bytes(), std::move(reader)));
}

SharedMemoryClient::Writer::~Writer() {
  if (!dir_.empty()) RemoveSegmentTree(dir_);
}

bool SharedMemoryClient::Writer::Write(const ChunkData& chunk, size_t size,
                                       SharedMemoryChunk* out) {
  if (dir_.empty()) {
    std::string dir =
        absl::StrCat(session_->prefix_, ".w", getpid(), "-", RandomToken());
    if (mkdir(SegmentPath(dir).c_str(), 0700) != 0) return false;
    dir_ = std::move(dir);
  }
  std::string name = absl::StrCat(dir_, "/", written_++);
  // The chunk's bytes as the pieces WireBuffer makes of them (large tensor
  // contents referenced, not copied), less the field header it starts with.
  WireBuffer wire;
  wire.PutChunk(1, chunk, size, [] { return std::shared_ptr<const void>(); });
  std::vector<grpc::Slice> slices;
  if (!wire.Finish().Dump(&slices).ok() || slices.empty()) return false;
  std::vector<absl::string_view> pieces;
  pieces.reserve(slices.size());
  for (const grpc::Slice& slice : slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                        slice.size());
  }
  pieces.front().remove_prefix(LengthDelimitedSize(size) - size);
  const absl::Status written =
      WriteSegment(name, pieces, absl::StrCat(session_->prefix_, ".free"),
                   &session_->write_mappings_);
  if (!written.ok()) return false;
  out->set_segment(std::move(name));
  out->set_secret(session_->secret_);
  return true;
}

SharedMemoryClient::ReaderDir::~ReaderDir() { RemoveSegmentTree(name); }

absl::Status SharedMemoryClient::TakeChunks(SampleStreamResponse* response,
                                            HeldChunkContents* held) const {
  for (auto& entry : *response->mutable_entries()) {
    for (const SharedMemoryChunk& shared : entry.shared_data()) {
      if (!LentName(shared.segment(), prefix_)) {
        return absl::InvalidArgumentError(
            absl::StrCat("The server lent shared-memory chunk '",
                         shared.segment(), "', a name it may not use."));
      }
      // Ours from now on: the server removes what it lent only while it is
      // in the stream's directory. While our link is there, the server does
      // not hand the segment to a writer either; it goes with the mapping.
      std::string name = absl::StrCat(reader_->name, "/", next_read_++);
      if (rename(SegmentPath(shared.segment()).c_str(),
                 SegmentPath(name).c_str()) != 0) {
        return absl::CancelledError(absl::StrCat(
            "Shared-memory chunk ", shared.segment(),
            " was withdrawn before it was read (the call has ended)."));
      }
      auto segment = OpenSegmentFile(name);
      if (!segment.ok()) {
        unlink(SegmentPath(name).c_str());
        return segment.status();
      }
      // A segment met before is read from the mapping kept of it; one met
      // for the first time is mapped to be kept, and its stored tensors are
      // read with pread meanwhile (faulting their pages in for one read
      // costs more than the copy).
      bool met = false;
      REVERB_ASSIGN_OR_RETURN(
          absl::Cord bytes,
          MapKeptSegment(
              *segment, read_mappings_,
              [name, dir = reader_]() { unlink(SegmentPath(name).c_str()); },
              &met));
      // The tensors' contents are pieces of the mapping, flat as it is.
      ChunkData* chunk = entry.add_data();
      std::vector<absl::Cord> pieces;
      const absl::optional<absl::string_view> whole = bytes.TryFlat();
      if (!whole.has_value() || !ParseChunkHeader(bytes, chunk, &pieces).ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Shared-memory chunk ", shared.segment(), " is not a chunk."));
      }
      ChunkContents& contents = held->Hold(chunk, std::move(pieces));
      if (!met) contents.segment = std::move(name);
      contents.base = whole->data();
      contents.size = whole->size();
    }
    entry.clear_shared_data();
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
