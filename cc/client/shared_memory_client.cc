#include "cc/client/shared_memory_client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cc/client/built_chunk.h"
#include "cc/core/chunk.h"
#include "cc/support/pages.h"
#include "cc/support/shm_segment.h"
#include "cc/support/status_macros.h"
#include "cc/support/stream_copy.h"
#include "cc/tensor/compression.h"
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

// The link that keeps a built chunk's segment (`name`) for this process
// once it is sent.
std::string KeptName(absl::string_view name) { return absl::StrCat(name, "k"); }

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
  auto reader = std::make_shared<OwnedDir>();
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

std::string SharedMemoryClient::Writer::NextName() {
  if (dir_.empty()) {
    std::string dir =
        absl::StrCat(session_->prefix_, ".w", getpid(), "-", RandomToken());
    if (mkdir(SegmentPath(dir).c_str(), 0700) != 0) return "";
    dir_ = std::move(dir);
  }
  return absl::StrCat(dir_, "/", written_++);
}

bool SharedMemoryClient::Writer::Write(
    const std::shared_ptr<const ChunkData>& chunk, size_t size,
    SharedMemoryChunk* out) {
  std::string name = NextName();
  if (name.empty()) return false;
  std::vector<absl::string_view> pieces;
  std::vector<grpc::Slice> slices;
  if (const BuiltChunk* built = FindBuiltChunk(chunk)) {
    // Sized to the chunk (it was built in whole pages), linked as
    // KeptName() for as long as the chunk lives here, and moved into the
    // stream's directory for the server to take: the name it was mapped by
    // moves on with it (so the mappings kept see it live on, see
    // segment_mappings.h), the other one stays.
    const std::string path = SegmentPath(built->segment);
    const std::string kept = SegmentPath(KeptName(built->segment));
    if (built->prefix == session_->prefix_ && !built->sent.exchange(true) &&
        truncate(path.c_str(), static_cast<off_t>(built->bytes.size())) == 0 &&
        link(path.c_str(), kept.c_str()) == 0) {
      if (rename(path.c_str(), SegmentPath(name).c_str()) == 0) {
        out->set_segment(std::move(name));
        out->set_secret(session_->secret_);
        sent_built_.push_back(built->bytes.size());
        return true;
      }
      unlink(kept.c_str());
    }
    // Sent before (on a stream that broke), or built for another server.
    for (absl::string_view piece : built->bytes.Chunks()) {
      pieces.push_back(piece);
    }
  } else {
    // The chunk's bytes as the pieces WireBuffer makes of them (large
    // tensor contents referenced, not copied), less the field header it
    // starts with.
    WireBuffer wire;
    wire.PutChunk(1, *chunk, size,
                  [] { return std::shared_ptr<const void>(); });
    if (!wire.Finish().Dump(&slices).ok() || slices.empty()) return false;
    pieces.reserve(slices.size());
    for (const grpc::Slice& slice : slices) {
      pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                          slice.size());
    }
    pieces.front().remove_prefix(LengthDelimitedSize(size) - size);
  }
  const absl::Status written =
      WriteSegment(name, pieces, &session_->free_, &session_->write_mappings_);
  if (!written.ok()) return false;
  out->set_segment(std::move(name));
  out->set_secret(session_->secret_);
  return true;
}

void SharedMemoryClient::Writer::MakeNextReady() {
  for (size_t size : sent_built_) session_->PrepareSegment(size);
  sent_built_.clear();
}

std::shared_ptr<SharedMemoryClient::OwnedDir>
SharedMemoryClient::BuildDirLocked(std::string* name) const {
  if (build_ == nullptr) {
    auto made = std::make_shared<OwnedDir>();
    made->name = absl::StrCat(prefix_, ".w", getpid(), "-", RandomToken());
    if (mkdir(SegmentPath(made->name).c_str(), 0700) != 0) return nullptr;
    build_ = std::move(made);
  }
  *name = absl::StrCat(build_->name, "/", next_built_++);
  return build_;
}

bool SharedMemoryClient::MakeReady(size_t pages, ReadySegment* segment) const {
  {
    MutexLock lock(&build_mu_);
    if (BuildDirLocked(&segment->name) == nullptr) return false;
  }
  auto mapped =
      MapNewSegment(segment->name, pages * PageSize(), &free_, write_mappings_);
  if (!mapped.ok()) return false;
  segment->mapping = *std::move(mapped);
  segment->pages = pages;
  return true;
}

void SharedMemoryClient::PrepareSegment(size_t size) const {
  const size_t pages = PagesOf(size);
  {
    // As many as a stream's request may take, within a bound on the memory
    // they keep from the server's pool.
    MutexLock lock(&build_mu_);
    size_t ready_pages = 0;
    for (const ReadySegment& ready : ready_) ready_pages += ready.pages;
    if (static_cast<int>(ready_.size()) >= kMaxReadySegments ||
        (ready_pages + pages) * PageSize() > kMaxReadyBytes) {
      return;
    }
  }
  ReadySegment segment;
  if (!MakeReady(pages, &segment)) return;
  MutexLock lock(&build_mu_);
  ready_.push_back(std::move(segment));
}

std::shared_ptr<const ChunkData> SharedMemoryClient::BuildChunk(
    ChunkData header, size_t content_size,
    absl::FunctionRef<void(char*)> fill) const {
  const std::string before = ChunkBytesBeforeContent(header, content_size);
  const size_t size = before.size() + content_size;
  const size_t pages = PagesOf(size);
  ReadySegment segment;
  std::shared_ptr<OwnedDir> dir;
  {
    MutexLock lock(&build_mu_);
    dir = build_;
    auto it = std::find_if(
        ready_.begin(), ready_.end(),
        [pages](const ReadySegment& ready) { return ready.pages == pages; });
    if (it != ready_.end()) {
      segment = std::move(*it);
      ready_.erase(it);
    }
  }
  if (segment.mapping == nullptr) {
    if (!MakeReady(pages, &segment)) return nullptr;
    MutexLock lock(&build_mu_);
    dir = build_;
  }
  char* out = segment.mapping.get();
  std::memcpy(out, before.data(), before.size());
  fill(out + before.size());
  auto built = std::make_unique<BuiltChunk>();
  built->header = std::move(header);
  built->bytes =
      absl::MakeCordFromExternal(absl::string_view(out, size),
                                 [mapping = std::move(segment.mapping),
                                  name = segment.name, dir = std::move(dir)]() {
                                   // Its name if it was never sent, else the
                                   // link kept when it was.
                                   unlink(SegmentPath(name).c_str());
                                   unlink(SegmentPath(KeptName(name)).c_str());
                                 });
  built->segment = std::move(segment.name);
  built->prefix = prefix_;
  return MakeBuiltChunk(std::move(built));
}

std::shared_ptr<const ChunkData> SharedMemoryClient::BuildStoredChunk(
    ChunkData header, const TensorView& rows) const {
  if (rows.IsString() ||
      static_cast<int64_t>(rows.bytes.size()) < min_chunk_bytes_ ||
      !StoredWithoutTrying(rows.bytes)) {
    return nullptr;
  }
  tensorflow::TensorProto* tensor = header.mutable_data()->add_tensors();
  tensor->set_dtype(rows.dtype);
  for (int64_t dim : rows.shape) {
    tensor->mutable_tensor_shape()->add_dim()->set_size(dim);
  }
  const std::string stored = StoredHeader(rows.bytes.size());
  return BuildChunk(
      std::move(header), stored.size() + rows.bytes.size(), [&](char* out) {
        std::memcpy(out, stored.data(), stored.size());
        StreamCopy(out + stored.size(), rows.bytes.data(), rows.bytes.size());
      });
}

SharedMemoryClient::OwnedDir::~OwnedDir() { RemoveSegmentTree(name); }

absl::StatusOr<absl::Cord> SharedMemoryClient::TakeLent(absl::string_view lent,
                                                        absl::string_view what,
                                                        std::string* taken,
                                                        bool* met) const {
  if (!LentName(lent, prefix_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("The server lent shared-memory ", what, " '", lent,
                     "', a name it may not use."));
  }
  // Ours from now on: the server removes what it lent only while it is in
  // the stream's directory. While our link is there, the server does not
  // reuse the segment either; it goes with the mapping.
  std::string name = absl::StrCat(reader_->name, "/", next_read_++);
  if (rename(SegmentPath(lent).c_str(), SegmentPath(name).c_str()) != 0) {
    return absl::CancelledError(
        absl::StrCat("Shared-memory ", what, " ", lent,
                     " was withdrawn before it was read (the call has "
                     "ended)."));
  }
  auto segment = OpenSegmentFile(name);
  if (!segment.ok()) {
    unlink(SegmentPath(name).c_str());
    return segment.status();
  }
  if (taken != nullptr) *taken = name;
  return MapKeptSegment(
      *segment, read_mappings_,
      [name, dir = reader_]() { unlink(SegmentPath(name).c_str()); }, met);
}

absl::StatusOr<absl::Cord> SharedMemoryClient::TakeResponse(
    const SharedMemoryResponse& shared) const {
  REVERB_ASSIGN_OR_RETURN(
      absl::Cord bytes,
      TakeLent(shared.segment(), "response", /*taken=*/nullptr,
               /*met=*/nullptr));
  if (bytes.size() < shared.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shared-memory response ", shared.segment(),
                     " is shorter than its ", shared.size(), " bytes."));
  }
  return bytes.Subcord(0, shared.size());
}

absl::Status SharedMemoryClient::TakeChunks(SampleStreamResponse* response,
                                            HeldChunkContents* held) const {
  for (auto& entry : *response->mutable_entries()) {
    for (const SharedMemoryChunk& shared : entry.shared_data()) {
      // A segment met before is read from the mapping kept of it; one met
      // for the first time is mapped to be kept, and its stored tensors are
      // read with pread meanwhile (faulting their pages in for one read
      // costs more than the copy).
      std::string name;
      bool met = false;
      REVERB_ASSIGN_OR_RETURN(absl::Cord bytes,
                              TakeLent(shared.segment(), "chunk", &name, &met));
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
