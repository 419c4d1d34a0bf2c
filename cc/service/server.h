// Server: a gRPC server hosting a ReverbServiceImpl over a set of tables.
//
// Listens on `bind_address:port` (TCP), on a unix domain socket, or on both,
// with the credentials of `security` (server_security.h; plaintext by
// default), within `limits` (server_limits.h: the size of messages it
// receives, the streams of a connection, ...); port 0 picks a free
// port (see port()). dm-reverb always listens on all interfaces on TCP only;
// callers choose here (the Python layer defaults to loopback). Clients reach
// the unix socket at `unix:PATH`. Its file is removed at Stop(); a stale one
// at the same path (left by a killed server) is replaced at start.
//
// Keepalive (cc/support/keepalive.h): the server pings its clients once a
// connection has been quiet for `keepalive` and drops a connection whose
// ping goes unanswered for as long, so that the streams of a client that
// froze, or that a cut network hides, are cancelled within about
// 2 * `keepalive` and their reactors free what they hold (chunks of an
// insert stream, a sample stream's requests queued at a table); see
// ReverbServiceImpl::num_open_streams. Clients may ping it as often as
// every kMinPingInterval, calls or no calls.
//
// With a metrics port, an HTTP responder of its own (metrics_http.h)
// answers GET /metrics with the service's metrics (metrics.h).
#ifndef REVERB_CC_SERVICE_SERVER_H_
#define REVERB_CC_SERVICE_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/core/table.h"
#include "cc/service/metrics_http.h"
#include "cc/service/server_limits.h"
#include "cc/service/server_security.h"
#include "cc/service/service.h"
#include "cc/support/export.h"
#include "cc/support/keepalive.h"
#include "cc/support/mutex.h"
#include "grpcpp/server.h"

namespace deepmind::reverb {

struct ServerOptions {
  // The TCP port on `bind_address`; 0 picks a free one. None: no TCP
  // listener, only the unix socket (which is then required).
  std::optional<int> port = 0;
  std::string bind_address = "localhost";
  // Also listen (without a port: only listen) on the unix domain socket at
  // this filesystem path; empty: none.
  std::string unix_socket_path;
  // With a checkpointer, the tables are first restored from its newest
  // complete checkpoint, else from its fallback checkpoint, else they start
  // empty; other load errors fail the start.
  std::shared_ptr<Checkpointer> checkpointer;
  // Finite: save a checkpoint this often, on a thread of its own (a failed
  // save is printed to stderr).
  absl::Duration checkpoint_interval = absl::InfiniteDuration();
  // The server's keepalive (see above); infinite: it sends no pings.
  absl::Duration keepalive = KeepaliveFromEnvironment();
  // What one client may cost the server.
  ServerLimits limits;
  // TLS and the auth token (server_security.h). A server that listens on
  // TCP beyond loopback with neither prints a warning at start.
  ServerSecurity security;
  // Serve Prometheus metrics (metrics.h) over HTTP on this port (0: a free
  // one; see metrics_port()) of `bind_address` (loopback for a server on
  // its unix socket only); none: no metrics port.
  std::optional<int> metrics_port;
};

class REVERB_EXPORT Server {
 public:
  // INVALID_ARGUMENT for no tables, a null table, duplicate table names, a
  // port outside [0, 65535], neither a port nor a unix socket path, a limit
  // that is not positive, a `security` that LoadServerSecurity refuses, and
  // (as
  // dm-reverb) an address that cannot be bound. The unix socket path fails
  // as ClaimUnixSocketPath (unix_socket.h) says: a regular file there is
  // INVALID_ARGUMENT, a live server's socket FAILED_PRECONDITION.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      std::vector<std::shared_ptr<Table>> tables, ServerOptions options);

  // A server on TCP only (see ServerOptions).
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      std::vector<std::shared_ptr<Table>> tables, int port,
      const std::string& bind_address,
      std::shared_ptr<Checkpointer> checkpointer = nullptr,
      absl::Duration checkpoint_interval = absl::InfiniteDuration(),
      absl::Duration keepalive = KeepaliveFromEnvironment());

  // Stops (see Stop()).
  ~Server();

  // The TCP port; 0 if the server listens on its unix socket only.
  int port() const { return port_; }
  // Empty if the server does not listen on a unix socket.
  const std::string& unix_socket_path() const { return unix_socket_path_; }
  // The metrics port; 0 if the server serves none.
  int metrics_port() const {
    return metrics_ == nullptr ? 0 : metrics_->port();
  }
  const ReverbServiceImpl& service() const { return *service_; }

  // Closes all tables (waiting requests get CANCELLED), then shuts the gRPC
  // server down at once (which removes the unix socket file). Idempotent
  // and thread-safe.
  void Stop();

  // Waits until Stop() has run; false on timeout. Signals are not handled
  // here (the caller's job).
  bool Wait(absl::Duration timeout = absl::InfiniteDuration());

 private:
  Server(std::unique_ptr<ReverbServiceImpl> service,
         std::unique_ptr<grpc::Server> server, int port,
         std::string unix_socket_path);
  void SaveEvery(std::shared_ptr<Checkpointer> checkpointer,
                 absl::Duration interval);

  std::unique_ptr<ReverbServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  // Null without a metrics port; set once, before the server is returned.
  std::unique_ptr<MetricsHttpServer> metrics_;
  const int port_;
  const std::string unix_socket_path_;
  Mutex stop_mu_;
  Notification stopped_;
  std::thread checkpoint_thread_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SERVER_H_
