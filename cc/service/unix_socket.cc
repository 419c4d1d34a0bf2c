#include "cc/service/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace deepmind::reverb {
namespace {

// Whether a server accepts connections on the socket file at `path`.
absl::StatusOr<bool> Listening(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "Could not make a unix socket");
  const int connected =
      connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  close(fd);
  if (connected == 0) return true;
  if (error == ECONNREFUSED) return false;
  return absl::ErrnoToStatus(error,
                             absl::StrCat("Could not connect to ", path));
}

// Whether the directory that `path` would be made in exists.
bool DirectoryExists(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string directory =
      slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  struct stat file;
  return stat(directory.c_str(), &file) == 0 && S_ISDIR(file.st_mode);
}

}  // namespace

absl::Status ClaimUnixSocketPath(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("The unix socket path is empty.");
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("The unix socket path ", path, " is ", path.size(),
                     " bytes long; a socket address holds at most ",
                     sizeof(sockaddr_un::sun_path) - 1, "."));
  }
  struct stat file;
  if (lstat(path.c_str(), &file) != 0) {
    if (errno != ENOENT) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("Could not inspect ", path));
    }
    if (!DirectoryExists(path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Cannot listen on the unix socket ", path,
                       ": its directory does not exist."));
    }
    return absl::OkStatus();
  }
  if (!S_ISSOCK(file.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Cannot listen on the unix socket ", path,
        ": a file that is not a socket is there (remove it, or choose "
        "another path)."));
  }
  auto listening = Listening(path);
  if (!listening.ok()) return listening.status();
  if (*listening) {
    return absl::FailedPreconditionError(
        absl::StrCat("Cannot listen on the unix socket ", path,
                     ": a server is already listening there."));
  }
  // Left by a server that died without removing it.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("Could not remove the stale socket ", path));
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
