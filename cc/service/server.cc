#include "cc/service/server.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cc/service/metrics.h"
#include "cc/service/unix_socket.h"
#include "cc/support/log.h"
#include "cc/support/mutex.h"
#include "cc/support/protobuf_log.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace deepmind::reverb {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    std::vector<std::shared_ptr<Table>> tables, ServerOptions options) {
  RouteProtobufLog();
  if (tables.empty()) {
    return absl::InvalidArgumentError("A server needs at least one table.");
  }
  if (options.port.has_value() &&
      (*options.port < 0 || *options.port > 65535)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Port ", *options.port, " is out of range [0, 65535]."));
  }
  const bool on_unix_socket = !options.unix_socket_path.empty();
  if (!options.port.has_value() && !on_unix_socket) {
    return absl::InvalidArgumentError(
        "A server without a port needs a unix socket path.");
  }
  REVERB_ASSIGN_OR_RETURN(const ServerSecurity security,
                          LoadServerSecurity(std::move(options.security)));
  if (on_unix_socket) {
    REVERB_RETURN_IF_ERROR(ClaimUnixSocketPath(options.unix_socket_path));
  }
  const std::shared_ptr<Checkpointer>& checkpointer = options.checkpointer;
  if (checkpointer != nullptr) {
    absl::Status loaded = checkpointer->LoadLatest(tables);
    if (absl::IsNotFound(loaded)) {
      loaded = checkpointer->LoadFallbackCheckpoint(tables);
    }
    if (!loaded.ok() && !absl::IsNotFound(loaded)) return loaded;
  }
  REVERB_ASSIGN_OR_RETURN(
      auto service,
      ReverbServiceImpl::Create(tables, checkpointer, options.limits,
                                security.auth_token));
  int selected_port = 0;
  grpc::ServerBuilder builder;
  if (options.port.has_value()) {
    builder.AddListeningPort(
        absl::StrCat(options.bind_address, ":", *options.port),
        TcpServerCredentials(security), &selected_port);
  }
  if (on_unix_socket) {
    builder.AddListeningPort(absl::StrCat("unix:", options.unix_socket_path),
                             UnixSocketServerCredentials(security));
  }
  builder.RegisterService(service.get());
  builder.SetMaxReceiveMessageSize(options.limits.max_message_bytes);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONCURRENT_STREAMS,
      options.limits.max_concurrent_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC binds with SO_REUSEPORT by default: a second server on a port in
  // use would start without an error and the kernel would then split
  // connections between the two (and a port 0 bind could land on a port a
  // server still listens on). Without it the second one fails to start.
  // SO_REUSEADDR stays, so a restart on the port of a server that has
  // stopped works at once.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(absl::ToInt64Milliseconds(kMinPingInterval)));
  const absl::Duration keepalive = options.keepalive;
  if (keepalive != absl::InfiniteDuration()) {
    const int ms = static_cast<int>(
        std::max<int64_t>(1, absl::ToInt64Milliseconds(keepalive)));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
    // Pings go on while the server sends nothing (a sample stream waiting on
    // its rate limiter), so that a client that freezes later is found.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (options.port.has_value() && selected_port == 0)) {
    // dm-reverb's code and text (gRPC has logged why, e.g. the port is in
    // use).
    return absl::InvalidArgumentError("Failed to BuildAndStart gRPC server");
  }
  if (options.port.has_value() && !security.secured() &&
      !IsLoopbackAddress(options.bind_address)) {
    Log(LogSeverity::kWarning,
        absl::StrCat("The server listens on ", options.bind_address, ":",
                     selected_port,
                     ", beyond loopback, with neither TLS nor an auth token: "
                     "anyone who reaches the port can read, write and reset "
                     "its tables."));
  }
  std::unique_ptr<Server> result(
      new Server(std::move(service), std::move(server), selected_port,
                 std::move(options.unix_socket_path)));
  if (options.metrics_port.has_value()) {
    const ReverbServiceImpl* served = &result->service();
    REVERB_ASSIGN_OR_RETURN(
        result->metrics_,
        MetricsHttpServer::Start(
            options.port.has_value() ? options.bind_address : "localhost",
            *options.metrics_port,
            [served] { return RenderMetrics(*served); }));
  }
  if (checkpointer != nullptr &&
      options.checkpoint_interval != absl::InfiniteDuration()) {
    result->SaveEvery(checkpointer, options.checkpoint_interval);
  }
  return result;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    std::vector<std::shared_ptr<Table>> tables, int port,
    const std::string& bind_address, std::shared_ptr<Checkpointer> checkpointer,
    absl::Duration checkpoint_interval, absl::Duration keepalive) {
  ServerOptions options;
  options.port = port;
  options.bind_address = bind_address;
  options.checkpointer = std::move(checkpointer);
  options.checkpoint_interval = checkpoint_interval;
  options.keepalive = keepalive;
  return Start(std::move(tables), std::move(options));
}

void Server::SaveEvery(std::shared_ptr<Checkpointer> checkpointer,
                       absl::Duration interval) {
  checkpoint_thread_ = std::thread([this, checkpointer, interval] {
    while (!stopped_.WaitForNotificationWithTimeout(interval)) {
      auto path = checkpointer->Save(service_->tables());
      if (!path.ok()) {
        Log(LogSeverity::kError, absl::StrCat("Periodic checkpoint failed: ",
                                              path.status().ToString()));
      }
    }
  });
  SetThreadName(checkpoint_thread_, "reverb-ckpt");
}

Server::Server(std::unique_ptr<ReverbServiceImpl> service,
               std::unique_ptr<grpc::Server> server, int port,
               std::string unix_socket_path)
    : service_(std::move(service)),
      server_(std::move(server)),
      port_(port),
      unix_socket_path_(std::move(unix_socket_path)) {}

Server::~Server() { Stop(); }

void Server::Stop() {
  MutexLock lock(&stop_mu_);
  if (stopped_.HasBeenNotified()) return;
  if (metrics_ != nullptr) metrics_->Stop();
  service_->Close();
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  stopped_.Notify();
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
}

bool Server::Wait(absl::Duration timeout) {
  return stopped_.WaitForNotificationWithTimeout(timeout);
}

}  // namespace deepmind::reverb
