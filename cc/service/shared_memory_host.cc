#include "cc/service/shared_memory_host.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cc/support/log.h"
#include "cc/support/shm_segment.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {
namespace {

int64_t MinChunkBytes() {
  const char* value = std::getenv("REVERB_SHARED_MEMORY_MIN_BYTES");
  int64_t bytes;
  if (value != nullptr && absl::SimpleAtoi(value, &bytes) && bytes > 0) {
    return bytes;
  }
  return SharedMemoryHost::kDefaultMinChunkBytes;
}

bool NameCharacter(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
         c == '_';
}

// Whether `name` is "<prefix>.w<pid>-<token>/<file>" (letters, digits,
// '-' and '_' after the prefix); sets `dir` to its directory.
bool WriterSegmentName(absl::string_view name, absl::string_view prefix,
                       absl::string_view* dir) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, prefix) ||
      !absl::ConsumePrefix(&rest, ".w")) {
    return false;
  }
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos || slash == 0 ||
      slash + 1 == rest.size()) {
    return false;
  }
  for (size_t i = 0; i < rest.size(); ++i) {
    if (i != slash && !NameCharacter(rest[i])) return false;
  }
  *dir = name.substr(0, name.size() - (rest.size() - slash));
  return true;
}

// The client's pid in a directory name "<prefix>.w<pid>-<token>" or
// "<prefix>.r<pid>-<token>", or -1.
int64_t ClientPid(absl::string_view name, absl::string_view prefix) {
  if (!absl::ConsumePrefix(&name, prefix) ||
      !(absl::ConsumePrefix(&name, ".w") || absl::ConsumePrefix(&name, ".r"))) {
    return -1;
  }
  int64_t pid;
  const size_t dash = name.find('-');
  if (dash == absl::string_view::npos ||
      !absl::SimpleAtoi(name.substr(0, dash), &pid) || pid <= 0) {
    return -1;
  }
  return pid;
}

}  // namespace

std::unique_ptr<SharedMemoryHost> SharedMemoryHost::Create() {
  if (!SharedMemoryAllowed()) return nullptr;
  SweepDeadServers();
  const std::string prefix = ServerPrefix(RandomToken());
  const std::string secret = absl::StrCat(RandomToken(), RandomToken());
  absl::Status status = WriteSegment(absl::StrCat(prefix, ".probe"), {secret});
  for (const char* dir : {".chunks", ".free"}) {
    if (status.ok() &&
        mkdir(SegmentPath(absl::StrCat(prefix, dir)).c_str(), 0700) != 0) {
      status = absl::InternalError(std::strerror(errno));
    }
  }
  if (!status.ok()) {
    RemoveSegmentTree(absl::StrCat(prefix, ".probe"));
    RemoveSegmentTree(absl::StrCat(prefix, ".chunks"));
    Log(LogSeverity::kWarning,
        absl::StrCat("Shared memory is off (clients on this host use gRPC "
                     "bytes): ",
                     status.message()));
    return nullptr;
  }
  return std::unique_ptr<SharedMemoryHost>(
      new SharedMemoryHost(prefix, secret, MinChunkBytes()));
}

SharedMemoryHost::SharedMemoryHost(std::string prefix, std::string secret,
                                   int64_t min_chunk_bytes)
    : prefix_(std::move(prefix)),
      secret_(std::move(secret)),
      min_chunk_bytes_(min_chunk_bytes),
      pid_namespace_(PidNamespace()),
      free_(std::make_shared<SegmentPool>(absl::StrCat(prefix_, ".free"),
                                          kMaxFreeSegments, kMaxFreeBytes)) {
  trimmer_ = std::thread([this] { TrimIdleFreeSegments(); });
  SetThreadName(trimmer_, "reverb-shm-trim");
}

SharedMemoryHost::~SharedMemoryHost() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  trimmer_.join();
  const std::string own = absl::StrCat(prefix_, ".");
  for (const std::string& name : ListSegments("")) {
    if (absl::StartsWith(name, own)) RemoveSegmentTree(name);
  }
}

void SharedMemoryHost::TrimIdleFreeSegments() {
  const std::string& pool = free_->dir();
  std::vector<std::string> seen;  // In P.free at the last look, sorted.
  MutexLock lock(&mu_);
  auto stopping = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (
      !mu_.AwaitWithTimeout(absl::Condition(&stopping), kFreeSegmentIdleTime)) {
    std::vector<std::string> now = ListSegments(pool);
    std::sort(now.begin(), now.end());
    std::vector<std::string> fresh;
    for (std::string& file : now) {
      // A writer taking it meanwhile renames it first, or makes a new one.
      if (std::binary_search(seen.begin(), seen.end(), file)) {
        unlink(SegmentPath(absl::StrCat(pool, "/", file)).c_str());
      } else {
        fresh.push_back(std::move(file));
      }
    }
    seen = std::move(fresh);
    SweepDeadClients();
  }
}

void SharedMemoryHost::SweepDeadClients() const {
  RemoveSegmentsOfDeadProcesses(
      [this](absl::string_view name) { return ClientPid(name, prefix_); });
}

SharedMemorySessionResponse SharedMemoryHost::Offer(
    const SharedMemorySessionRequest& request) const {
  SharedMemorySessionResponse response;
  if (request.pid_namespace() != pid_namespace_ || pid_namespace_ == 0 ||
      !ProcessAlive(request.pid())) {
    return response;
  }
  response.set_probe(absl::StrCat(prefix_, ".probe"));
  response.set_prefix(prefix_);
  response.set_min_chunk_bytes(min_chunk_bytes_);
  return response;
}

bool SharedMemoryHost::SecretMatches(absl::string_view secret) const {
  return secret == secret_;
}

absl::StatusOr<std::shared_ptr<Chunk>> SharedMemoryHost::Accept(
    const SharedMemoryChunk& chunk, std::vector<std::string>* writer_dirs) {
  absl::string_view dir;
  if (!SecretMatches(chunk.secret()) ||
      !WriterSegmentName(chunk.segment(), prefix_, &dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shared-memory chunk '", chunk.segment(),
                     "' is not one this server accepts (a wrong name or "
                     "secret)."));
  }
  if (std::find(writer_dirs->begin(), writer_dirs->end(), dir) ==
      writer_dirs->end()) {
    writer_dirs->emplace_back(dir);
  }
  REVERB_ASSIGN_OR_RETURN(OpenSegment segment,
                          OpenSegmentFile(chunk.segment()));
  const std::string number = absl::StrCat(next_chunk_++);
  std::string name = absl::StrCat(prefix_, ".chunks/", number);
  if (rename(SegmentPath(chunk.segment()).c_str(), SegmentPath(name).c_str()) !=
      0) {
    return absl::InternalError(
        absl::StrCat("Could not keep shared-memory chunk ", chunk.segment(),
                     ": ", std::strerror(errno)));
  }
  auto bytes = MapKeptSegment(
      segment, mappings_,
      [name, pool = free_, number]() { pool->Recycle(name, number); });
  if (!bytes.ok()) {
    unlink(SegmentPath(name).c_str());
    return bytes.status();
  }
  return Chunk::Parse(*std::move(bytes), std::move(name));
}

void SharedMemoryHost::ForgetStream(
    const std::vector<std::string>& dirs) const {
  for (const std::string& dir : dirs) RemoveSegmentTree(dir);
  SweepDeadClients();
}

SharedMemoryHost::Lender::~Lender() {
  for (ResponseSegment& segment : responses_) {
    if (segment.mapping != nullptr) munmap(segment.mapping, segment.size);
    close(segment.fd);
  }
  if (!dir_.empty()) host_->ForgetStream({dir_});
}

bool SharedMemoryHost::Lender::MakeDir() {
  if (dir_.empty()) {
    std::string dir = absl::StrCat(host_->prefix_, ".s", host_->next_lender_++);
    if (mkdir(SegmentPath(dir).c_str(), 0700) != 0) return false;
    dir_ = std::move(dir);
  }
  return true;
}

std::string SharedMemoryHost::Lender::Lend(const Chunk& chunk) {
  if (!MakeDir()) return "";
  std::string name = absl::StrCat(dir_, "/", lent_++);
  if (link(SegmentPath(chunk.segment()).c_str(), SegmentPath(name).c_str()) !=
      0) {
    return "";
  }
  return name;
}

bool SharedMemoryHost::Lender::Resize(ResponseSegment* segment, size_t size) {
  if (segment->mapping != nullptr) munmap(segment->mapping, segment->size);
  segment->mapping = nullptr;
  segment->size = 0;
  // Pages allocated now, not at the first touch (where a full /dev/shm
  // would be a SIGBUS); the client maps only files whose pages all are.
  if (ftruncate(segment->fd, static_cast<off_t>(size)) != 0 ||
      posix_fallocate(segment->fd, 0, static_cast<off_t>(size)) != 0) {
    return false;
  }
  void* address =
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, segment->fd, 0);
  if (address == MAP_FAILED) return false;
  segment->mapping = static_cast<char*>(address);
  segment->size = size;
  return true;
}

std::string SharedMemoryHost::Lender::LendResponse(
    size_t size, absl::FunctionRef<void(char*)> fill) {
  if (size == 0 || !MakeDir()) return "";
  // One the client is done with (only our link is left): the largest, so
  // that sizes settle; else a new one while there is room.
  ResponseSegment* segment = nullptr;
  for (ResponseSegment& candidate : responses_) {
    struct stat info;
    if (fstat(candidate.fd, &info) == 0 && info.st_nlink == 1 &&
        (segment == nullptr || candidate.size > segment->size)) {
      segment = &candidate;
    }
  }
  if (segment == nullptr) {
    if (static_cast<int>(responses_.size()) >= kMaxResponseSegments) return "";
    ResponseSegment made;
    made.name = absl::StrCat(dir_, "/o", responses_.size());
    made.fd = open(SegmentPath(made.name).c_str(),
                   O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (made.fd < 0) return "";
    responses_.push_back(std::move(made));
    segment = &responses_.back();
  }
  if (segment->size < size) {
    const size_t steps =
        (size + kResponseSegmentStep - 1) / kResponseSegmentStep;
    if (!Resize(segment, steps * kResponseSegmentStep)) return "";
  }
  fill(segment->mapping);
  std::string name = absl::StrCat(dir_, "/", lent_++);
  if (link(SegmentPath(segment->name).c_str(), SegmentPath(name).c_str()) !=
      0) {
    return "";
  }
  return name;
}

}  // namespace deepmind::reverb
