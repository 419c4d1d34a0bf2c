#include "cc/client/client.h"

#include <utility>

#include "cc/wire/grpc_status.h"

namespace deepmind::reverb {
namespace {

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout,
                 bool wait_for_ready) {
  context->set_wait_for_ready(wait_for_ready);
  if (timeout != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
}

}  // namespace

Client::Client(const std::string& server_address)
    : connection_(std::make_shared<Connection>(server_address)) {}

absl::Status Client::MutatePriorities(const std::string& table,
                                      absl::Span<const KeyWithPriority> updates,
                                      absl::Span<const uint64_t> deletes,
                                      absl::Duration timeout) {
  MutatePrioritiesRequest request;
  request.set_table(table);
  for (const auto& update : updates) *request.add_updates() = update;
  request.mutable_delete_keys()->Add(deletes.begin(), deletes.end());
  grpc::ClientContext context;
  SetDeadline(&context, timeout, /*wait_for_ready=*/true);
  MutatePrioritiesResponse response;
  return FromGrpcStatus(
      connection_->stub()->MutatePriorities(&context, request, &response));
}

absl::Status Client::Reset(const std::string& table, absl::Duration timeout) {
  ResetRequest request;
  request.set_table(table);
  grpc::ClientContext context;
  SetDeadline(&context, timeout, /*wait_for_ready=*/true);
  ResetResponse response;
  return FromGrpcStatus(
      connection_->stub()->Reset(&context, request, &response));
}

absl::StatusOr<ServerInfoResponse> Client::ServerInfo(absl::Duration timeout) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout, /*wait_for_ready=*/true);
  ServerInfoResponse response;
  grpc::Status status =
      connection_->stub()->ServerInfo(&context, ServerInfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<std::string> Client::Checkpoint(absl::Duration timeout) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout, /*wait_for_ready=*/false);
  CheckpointResponse response;
  grpc::Status status =
      connection_->stub()->Checkpoint(&context, CheckpointRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.checkpoint_path();
}

absl::StatusOr<std::unique_ptr<Writer>> Client::NewWriter(
    const WriterOptions& options) {
  return Writer::Create(connection_, options);
}

absl::StatusOr<std::unique_ptr<TrajectoryWriter>> Client::NewTrajectoryWriter(
    std::shared_ptr<ChunkerOptions> options) {
  return TrajectoryWriter::Create(connection_, std::move(options));
}

absl::StatusOr<std::unique_ptr<Sampler>> Client::NewSampler(
    const std::string& table, const SamplerOptions& options) {
  return Sampler::Create(connection_, table, options);
}

absl::StatusOr<std::unique_ptr<SampleStream>> Client::NewSampleStream(
    const std::string& table, absl::Duration connect_timeout) {
  absl::Status connected = connection_->WaitForConnection(connect_timeout);
  if (!connected.ok()) return connected;
  return std::make_unique<SampleStream>(connection_, table);
}

}  // namespace deepmind::reverb
