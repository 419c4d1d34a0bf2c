#include "cc/client.h"

#include <utility>

#include "cc/support/grpc_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace deepmind::reverb {
namespace {

constexpr int kMaxReconnectBackoffMs = 30 * 1000;

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  args.SetLoadBalancingPolicyName("round_robin");
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout,
                 bool wait_for_ready) {
  context->set_wait_for_ready(wait_for_ready);
  if (timeout != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
}

}  // namespace

Client::Client(const std::string& server_address)
    : server_address_(server_address),
      stub_(ReverbService::NewStub(MakeChannel(server_address))) {}

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
  return FromGrpcStatus(stub_->MutatePriorities(&context, request, &response));
}

absl::Status Client::Reset(const std::string& table, absl::Duration timeout) {
  ResetRequest request;
  request.set_table(table);
  grpc::ClientContext context;
  SetDeadline(&context, timeout, /*wait_for_ready=*/true);
  ResetResponse response;
  return FromGrpcStatus(stub_->Reset(&context, request, &response));
}

absl::StatusOr<ServerInfoResponse> Client::ServerInfo(absl::Duration timeout) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout, /*wait_for_ready=*/true);
  ServerInfoResponse response;
  grpc::Status status =
      stub_->ServerInfo(&context, ServerInfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<std::string> Client::Checkpoint(absl::Duration timeout) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout, /*wait_for_ready=*/false);
  CheckpointResponse response;
  grpc::Status status =
      stub_->Checkpoint(&context, CheckpointRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.checkpoint_path();
}

absl::StatusOr<std::unique_ptr<Writer>> Client::NewWriter(
    const WriterOptions& options) {
  return Writer::Create(stub_, options);
}

absl::StatusOr<std::unique_ptr<Sampler>> Client::NewSampler(
    const std::string& table, const SamplerOptions& options) {
  return Sampler::Create(stub_, table, options);
}

std::unique_ptr<SampleStream> Client::NewSampleStream(const std::string& table) {
  return std::make_unique<SampleStream>(stub_, table);
}

}  // namespace deepmind::reverb
