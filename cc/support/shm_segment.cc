#include "cc/support/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cc/support/pages.h"
#include "cc/support/status_macros.h"
#include "cc/support/stream_copy.h"

namespace deepmind::reverb {
namespace {

// Reads `length` bytes of file `fd` from `offset` into `out`.
absl::Status ReadAt(int fd, size_t offset, char* out, size_t length) {
  size_t done = 0;
  while (done < length) {
    const ssize_t read =
        pread(fd, out + done, length - done, static_cast<off_t>(offset + done));
    if (read < 0 && errno == EINTR) continue;
    if (read <= 0) {
      return absl::InternalError("Could not read a shared-memory segment.");
    }
    done += static_cast<size_t>(read);
  }
  return absl::OkStatus();
}

absl::Status Errno(absl::string_view what, absl::string_view name) {
  const int error = errno;
  const std::string text =
      absl::StrCat(what, " ", SegmentPath(name), ": ", std::strerror(error));
  return error == ENOENT ? absl::NotFoundError(text)
                         : absl::InternalError(text);
}

// The pid in "reverb-<pid>-<pid namespace>-...", or -1 (also for a server
// of another pid namespace than `pid_namespace`, whose processes this one
// cannot see).
int64_t ServerPid(absl::string_view name, absl::string_view pid_namespace) {
  if (!absl::ConsumePrefix(&name, "reverb-")) return -1;
  const std::vector<absl::string_view> parts =
      absl::StrSplit(name, absl::MaxSplits('-', 2));
  int64_t pid;
  if (parts.size() < 3 || !absl::SimpleAtoi(parts[0], &pid) || pid <= 0 ||
      parts[1] != pid_namespace) {
    return -1;
  }
  return pid;
}

}  // namespace

bool SharedMemoryAllowed() {
  const char* value = std::getenv("REVERB_SHARED_MEMORY");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

std::string SegmentPath(absl::string_view name) {
  return absl::StrCat(kSharedMemoryDir, "/", name);
}

uint64_t PidNamespace() {
  struct stat info;
  if (stat("/proc/self/ns/pid", &info) != 0) return 0;
  return info.st_ino;
}

bool ProcessAlive(int64_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "<pid> (<comm>) <state> ...": the command may hold spaces and ')'.
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() &&
         line[paren + 2] != 'Z' && line[paren + 2] != 'X';
}

std::string RandomToken() {
  std::random_device device;
  const uint64_t value = (uint64_t{device()} << 32) ^ device();
  return absl::StrFormat("%016x", value);
}

std::string ServerPrefix(absl::string_view token) {
  return absl::StrCat("reverb-", getpid(), "-", PidNamespace(), "-", token);
}

namespace {

// Makes file `name` (it must not exist) of `size` bytes, one of `reuse`'s
// if it holds one (see WriteSegment); returns it opened for writing.
absl::StatusOr<int> MakeSegmentFile(absl::string_view name, size_t size,
                                    SegmentPool* reuse) {
  const std::string path = SegmentPath(name);
  int fd = -1;
  if (reuse != nullptr && reuse->Take(name, PagesOf(size))) {
    fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) unlink(path.c_str());
  }
  if (fd < 0) {
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0) return Errno("Could not create", name);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    absl::Status status = Errno("Could not size", name);
    close(fd);
    unlink(path.c_str());
    return status;
  }
  return fd;
}

}  // namespace

absl::Status WriteSegment(absl::string_view name,
                          absl::Span<const absl::string_view> pieces,
                          SegmentPool* reuse, SegmentMappings* mappings) {
  std::vector<iovec> rest;
  size_t size = 0;
  for (absl::string_view piece : pieces) {
    if (piece.empty()) continue;
    rest.push_back({const_cast<char*>(piece.data()), piece.size()});
    size += piece.size();
  }
  const std::string path = SegmentPath(name);
  REVERB_ASSIGN_OR_RETURN(const int fd, MakeSegmentFile(name, size, reuse));
  absl::Status status;
  if (mappings != nullptr) {
    if (std::shared_ptr<char> mapped = mappings->Find(fd, size)) {
      char* out = mapped.get();
      for (const iovec& piece : rest) {
        StreamCopy(out, static_cast<const char*>(piece.iov_base),
                   piece.iov_len);
        out += piece.iov_len;
      }
      rest.clear();
    }
  }
  // pwritev takes at most IOV_MAX pieces and may write part of them.
  size_t first = 0;
  off_t offset = 0;
  while (status.ok() && first < rest.size()) {
    const int count =
        static_cast<int>(std::min<size_t>(rest.size() - first, IOV_MAX));
    const ssize_t written = pwritev(fd, &rest[first], count, offset);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      status = Errno("Could not write", name);
      break;
    }
    offset += written;
    size_t left = static_cast<size_t>(written);
    while (first < rest.size() && left >= rest[first].iov_len) {
      left -= rest[first].iov_len;
      ++first;
    }
    if (left > 0) {
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + left;
      rest[first].iov_len -= left;
    }
  }
  // Written with pwrite: mapped for the next time.
  if (status.ok() && mappings != nullptr && offset > 0) {
    mappings->Keep(fd, size);
  }
  close(fd);
  if (!status.ok()) unlink(path.c_str());
  return status;
}

absl::StatusOr<std::shared_ptr<char>> MapNewSegment(absl::string_view name,
                                                    size_t size,
                                                    SegmentPool* reuse,
                                                    SegmentMappings& mappings) {
  REVERB_ASSIGN_OR_RETURN(const int fd, MakeSegmentFile(name, size, reuse));
  std::shared_ptr<char> mapped = mappings.Find(fd, size);
  absl::Status status;
  if (mapped == nullptr) {
    // Pages allocated now, not at the first touch (where a full /dev/shm
    // would be a SIGBUS).
    if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(size));
        error != 0) {
      errno = error;
      status = Errno("Could not allocate", name);
    } else if ((mapped = mappings.Keep(fd, size)) == nullptr) {
      status = absl::ResourceExhaustedError(
          absl::StrCat("Could not map ", SegmentPath(name), "."));
    }
  }
  close(fd);
  if (!status.ok()) {
    unlink(SegmentPath(name).c_str());
    return status;
  }
  return mapped;
}

OpenSegment::OpenSegment(OpenSegment&& other) noexcept
    : fd(std::exchange(other.fd, -1)), size(other.size) {}

OpenSegment::~OpenSegment() {
  if (fd >= 0) close(fd);
}

absl::StatusOr<OpenSegment> OpenSegmentFile(absl::string_view name) {
  OpenSegment segment;
  segment.fd =
      open(SegmentPath(name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (segment.fd < 0) return Errno("Could not open", name);
  struct stat info;
  if (fstat(segment.fd, &info) != 0) return Errno("Could not stat", name);
  if (!S_ISREG(info.st_mode) || info.st_uid != geteuid() || info.st_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        SegmentPath(name),
        " is not a shared-memory segment (a non-empty file of this user)."));
  }
  segment.size = static_cast<size_t>(info.st_size);
  return segment;
}

absl::StatusOr<absl::Cord> MapSegment(const OpenSegment& segment,
                                      std::function<void()> on_release) {
  void* address =
      mmap(nullptr, segment.size, PROT_READ, MAP_SHARED, segment.fd, 0);
  if (address != MAP_FAILED) {
    const absl::string_view bytes(static_cast<const char*>(address),
                                  segment.size);
    return absl::MakeCordFromExternal(
        bytes,
        [address, size = segment.size, on_release = std::move(on_release)]() {
          munmap(address, size);
          if (on_release) on_release();
        });
  }
  std::string bytes(segment.size, '\0');
  REVERB_RETURN_IF_ERROR(ReadAt(segment.fd, 0, bytes.data(), bytes.size()));
  if (on_release) on_release();
  return absl::Cord(std::move(bytes));
}

absl::StatusOr<absl::Cord> MapKeptSegment(const OpenSegment& segment,
                                          SegmentMappings& mappings,
                                          std::function<void()> on_release,
                                          bool* kept) {
  std::shared_ptr<char> mapped = mappings.Find(segment.fd, segment.size);
  if (kept != nullptr) *kept = mapped != nullptr;
  if (mapped == nullptr) mapped = mappings.Keep(segment.fd, segment.size);
  if (mapped == nullptr) return MapSegment(segment, std::move(on_release));
  const absl::string_view bytes(mapped.get(), segment.size);
  return absl::MakeCordFromExternal(
      bytes,
      [mapped = std::move(mapped), on_release = std::move(on_release)]() {
        if (on_release) on_release();
      });
}

absl::Status ReadSegment(absl::string_view name, size_t offset, char* out,
                         size_t length) {
  REVERB_ASSIGN_OR_RETURN(const OpenSegment segment, OpenSegmentFile(name));
  return ReadAt(segment.fd, offset, out, length);
}

std::vector<std::string> ListSegments(absl::string_view dir) {
  std::vector<std::string> names;
  DIR* stream = opendir(SegmentPath(dir).c_str());
  if (stream == nullptr) return names;
  while (const dirent* entry = readdir(stream)) {
    if (std::strcmp(entry->d_name, ".") != 0 &&
        std::strcmp(entry->d_name, "..") != 0) {
      names.emplace_back(entry->d_name);
    }
  }
  closedir(stream);
  return names;
}

void RemoveSegmentTree(absl::string_view name) {
  const std::string path = SegmentPath(name);
  for (const std::string& file : ListSegments(name)) {
    unlink(absl::StrCat(path, "/", file).c_str());
  }
  if (rmdir(path.c_str()) != 0) unlink(path.c_str());
}

void RemoveSegmentsOfDeadProcesses(
    absl::FunctionRef<int64_t(absl::string_view name)> pid_of) {
  for (const std::string& name : ListSegments("")) {
    const int64_t pid = pid_of(name);
    if (pid > 0 && !ProcessAlive(pid)) RemoveSegmentTree(name);
  }
}

void SweepDeadServers() {
  const std::string pid_namespace = absl::StrCat(PidNamespace());
  RemoveSegmentsOfDeadProcesses([&pid_namespace](absl::string_view name) {
    return ServerPid(name, pid_namespace);
  });
}

}  // namespace deepmind::reverb
