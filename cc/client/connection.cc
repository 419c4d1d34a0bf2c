#include "cc/client/connection.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cc/client/local_table.h"
#include "cc/support/protobuf_log.h"
#include "cc/wire/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace deepmind::reverb {
namespace {

constexpr int kMaxReconnectBackoffMs = 30 * 1000;

// How long Explain's call waits for the channel's failure.
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);
// How often WaitForConnection explains a channel that stays failed.
constexpr absl::Duration kExplainInterval = absl::Milliseconds(250);
// How long LocalTables() waits for the server's answer at most.
constexpr absl::Duration kLocalTableTimeout = absl::Seconds(5);

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           absl::Duration keepalive,
                                           const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  // Channels of one process to one address share their connections by
  // default, and with them the reconnect backoff: a client made for a server
  // that just took the port of a stopped one would wait out (up to
  // kMaxReconnectBackoffMs) the backoff of an older client of the stopped
  // server. Each client connects on its own.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (keepalive != absl::InfiniteDuration()) {
    const int ms = static_cast<int>(
        std::max<int64_t>(1, absl::ToInt64Milliseconds(keepalive)));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    // Pings go on however long no data is sent (a stream waiting on a rate
    // limiter sends none), so that a server that freezes later is found.
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, ms);
  }
  args.SetLoadBalancingPolicyName("round_robin");
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      MakeChannelCredentials(address, security, &args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, args, MakeTokenInterceptors(security));
}

}  // namespace

bool InProcessAllowed() {
  const char* value = std::getenv("REVERB_IN_PROCESS");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

Connection::Connection(const std::string& server_address,
                       absl::Duration keepalive, ChannelSecurity security)
    : server_address_(server_address),
      security_(std::move(security)),
      channel_(MakeChannel(server_address, keepalive, security_)),
      stub_(ReverbService::NewStub(channel_)),
      insert_stream_("/deepmind.reverb.ReverbService/InsertStream",
                     grpc::internal::RpcMethod::BIDI_STREAMING, channel_),
      sample_stream_("/deepmind.reverb.ReverbService/SampleStream",
                     grpc::internal::RpcMethod::BIDI_STREAMING, channel_),
      in_process_allowed_(InProcessAllowed()) {
  RouteProtobufLog();
}

std::unique_ptr<
    grpc::ClientReaderWriter<grpc::ByteBuffer, InsertStreamResponse>>
Connection::OpenInsertStream(grpc::ClientContext* context) const {
  return std::unique_ptr<
      grpc::ClientReaderWriter<grpc::ByteBuffer, InsertStreamResponse>>(
      grpc::internal::ClientReaderWriterFactory<
          grpc::ByteBuffer, InsertStreamResponse>::Create(channel_.get(),
                                                          insert_stream_,
                                                          context));
}

std::unique_ptr<grpc::ClientReaderWriter<SampleStreamRequest, grpc::ByteBuffer>>
Connection::OpenSampleStream(grpc::ClientContext* context) const {
  return std::unique_ptr<
      grpc::ClientReaderWriter<SampleStreamRequest, grpc::ByteBuffer>>(
      grpc::internal::ClientReaderWriterFactory<
          SampleStreamRequest, grpc::ByteBuffer>::Create(channel_.get(),
                                                         sample_stream_,
                                                         context));
}

absl::Status Connection::WaitForConnection(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    absl::Time wake = deadline;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      absl::Status explained = Explain(absl::UnavailableError(""));
      if (absl::IsUnauthenticated(explained)) return explained;
      // The channel may stay in TRANSIENT_FAILURE through its reconnects
      // (round_robin), and the last error names the address that failed
      // last: look again after each reconnect could have failed.
      wake = std::min(deadline, absl::Now() + kExplainInterval);
    }
    if (!channel_->WaitForStateChange(state, absl::ToChronoTime(wake)) &&
        absl::Now() >= deadline) {
      break;
    }
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  if (state == GRPC_CHANNEL_READY) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "Could not connect to the Reverb server at ", server_address_, " within ",
      absl::FormatDuration(timeout), "."));
}

absl::Status Connection::Explain(const absl::Status& status) const {
  if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
    return status;
  }
  absl::Status explained = ExplainConnectFailure(
      status, server_address_, security_, /*connecting=*/false);
  if (absl::IsUnauthenticated(explained) ||
      channel_->GetState(/*try_to_connect=*/false) !=
          GRPC_CHANNEL_TRANSIENT_FAILURE) {
    return explained;
  }
  // A call that does not wait for the channel fails with its last error.
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kProbeTimeout));
  ServerInfoRequest request;
  ServerInfoResponse response;
  const grpc::Status probe = stub_->ServerInfo(&context, request, &response);
  if (probe.ok()) return status;
  explained = ExplainConnectFailure(FromGrpcStatus(probe), server_address_,
                                    security_, /*connecting=*/true);
  return absl::IsUnauthenticated(explained) ? explained : status;
}

void Connection::ResetConnectBackoff() const {
  grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
}

void Connection::LearnLocalTablesLocked(absl::Duration timeout) const {
  if (local_known_) {
    bool all_open = true;
    for (const auto& [name, weak] : local_tables_) {
      std::shared_ptr<Table> table = weak.lock();
      if (table == nullptr || table->closed()) all_open = false;
    }
    if (all_open) return;
  }
  local_known_ = false;
  local_tables_.clear();
  auto tables =
      AskLocalTables(stub_.get(), std::min(timeout, kLocalTableTimeout));
  if (!tables.ok()) return;
  local_known_ = true;
  for (const auto& table : *tables) local_tables_[table->name()] = table;
}

Connection::TablesByName Connection::LocalTables(absl::Duration timeout) const {
  TablesByName tables;
  if (!in_process_allowed_) return tables;
  MutexLock lock(&local_mu_);
  LearnLocalTablesLocked(timeout);
  for (const auto& [name, weak] : local_tables_) {
    if (auto table = weak.lock()) tables[name] = std::move(table);
  }
  return tables;
}

std::shared_ptr<Table> Connection::LocalTable(const std::string& table,
                                              absl::Duration timeout) const {
  if (!in_process_allowed_) return nullptr;
  MutexLock lock(&local_mu_);
  LearnLocalTablesLocked(timeout);
  auto it = local_tables_.find(table);
  return it == local_tables_.end() ? nullptr : it->second.lock();
}

std::shared_ptr<const SharedMemoryClient> Connection::SharedMemory(
    absl::Duration timeout, bool refresh) const {
  MutexLock lock(&shared_memory_mu_);
  if (shared_memory_known_ && !refresh) return shared_memory_;
  auto session = SharedMemoryClient::Start(
      stub_.get(), std::min(timeout, kLocalTableTimeout));
  shared_memory_known_ = session.ok();
  shared_memory_ = session.ok() ? *std::move(session) : nullptr;
  return shared_memory_;
}

std::shared_ptr<const SharedMemoryClient> Connection::KnownSharedMemory()
    const {
  MutexLock lock(&shared_memory_mu_);
  return shared_memory_;
}

}  // namespace deepmind::reverb
