// Server: a gRPC server hosting a ReverbServiceImpl over a set of tables.
//
// Listens on `bind_address:port` with insecure credentials and unlimited
// message sizes; port 0 picks a free port (see port()). dm-reverb always
// listens on all interfaces; callers choose here (the Python layer defaults
// to loopback).
//
// Keepalive (cc/support/keepalive.h): the server pings its clients once a
// connection has been quiet for `keepalive` and drops a connection whose
// ping goes unanswered for as long, so that the streams of a client that
// froze, or that a cut network hides, are cancelled within about
// 2 * `keepalive` and their reactors free what they hold (chunks of an
// insert stream, a sample stream's requests queued at a table); see
// ReverbServiceImpl::num_open_streams. Clients may ping it as often as
// every kMinPingInterval, calls or no calls.
#ifndef REVERB_CC_SERVICE_SERVER_H_
#define REVERB_CC_SERVICE_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/core/table.h"
#include "cc/service/service.h"
#include "cc/support/export.h"
#include "cc/support/keepalive.h"
#include "cc/support/mutex.h"
#include "grpcpp/server.h"

namespace deepmind::reverb {

class REVERB_EXPORT Server {
 public:
  // INVALID_ARGUMENT for no tables, a null table, duplicate table names, a
  // port outside [0, 65535], and (as dm-reverb) an address that cannot be
  // bound.
  //
  // With a checkpointer, the tables are first restored from its newest
  // complete checkpoint, else from its fallback checkpoint, else they start
  // empty; other load errors fail the start. A finite `checkpoint_interval`
  // saves a checkpoint that often, on a thread of its own (a failed save is
  // printed to stderr).
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      std::vector<std::shared_ptr<Table>> tables, int port,
      const std::string& bind_address,
      std::shared_ptr<Checkpointer> checkpointer = nullptr,
      absl::Duration checkpoint_interval = absl::InfiniteDuration(),
      absl::Duration keepalive = KeepaliveFromEnvironment());

  // Stops (see Stop()).
  ~Server();

  int port() const { return port_; }
  const ReverbServiceImpl& service() const { return *service_; }

  // Closes all tables (waiting requests get CANCELLED), then shuts the gRPC
  // server down at once. Idempotent and thread-safe.
  void Stop();

  // Waits until Stop() has run; false on timeout. Signals are not handled
  // here (the caller's job).
  bool Wait(absl::Duration timeout = absl::InfiniteDuration());

 private:
  Server(std::unique_ptr<ReverbServiceImpl> service,
         std::unique_ptr<grpc::Server> server, int port);
  void SaveEvery(std::shared_ptr<Checkpointer> checkpointer,
                 absl::Duration interval);

  std::unique_ptr<ReverbServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  const int port_;
  Mutex stop_mu_;
  Notification stopped_;
  std::thread checkpoint_thread_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SERVER_H_
