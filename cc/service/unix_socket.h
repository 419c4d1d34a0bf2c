// Claiming the path of a server's unix domain socket before its listener
// binds it.
//
// gRPC unlinks whatever socket file is at a path before it binds there, so
// a second server would silently take a live server's path; and a server
// that was killed leaves its file behind (gRPC removes it when the listener
// shuts down, which a killed process never does). ClaimUnixSocketPath tells
// the two apart by connecting: a socket file that refuses connections is
// stale and removed, one that accepts them belongs to a live server.
#ifndef REVERB_CC_SERVICE_UNIX_SOCKET_H_
#define REVERB_CC_SERVICE_UNIX_SOCKET_H_

#include <string>

#include "absl/status/status.h"

namespace deepmind::reverb {

// Makes `path` free for a listener: OK if nothing is there, or if a socket
// file nobody accepts connections on is there (it is removed).
// INVALID_ARGUMENT for an empty path, one longer than a socket address
// holds, one whose directory does not exist, or a path where something
// other than a socket is;
// FAILED_PRECONDITION if a server listens there; other failures as their
// errno (absl::ErrnoToStatus: e.g. PERMISSION_DENIED).
absl::Status ClaimUnixSocketPath(const std::string& path);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_UNIX_SOCKET_H_
