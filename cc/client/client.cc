#include "cc/client/client.h"

#include <utility>

#include "cc/client/ask_server_info.h"
#include "cc/client/sample_stream.h"
#include "cc/client/server_info.h"
#include "cc/client/sharded_sample_stream.h"
#include "cc/support/status_macros.h"
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
    : shards_(*Shards::Create({server_address})) {}

Client::Client(std::shared_ptr<Shards> shards) : shards_(std::move(shards)) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(
    std::vector<std::string> server_addresses) {
  REVERB_ASSIGN_OR_RETURN(std::shared_ptr<Shards> shards,
                          Shards::Create(std::move(server_addresses)));
  return std::unique_ptr<Client>(new Client(std::move(shards)));
}

template <typename Call>
absl::Status Client::OnEveryShard(Call call) {
  absl::Status first_error;
  for (int s = 0; s < shards_->size(); ++s) {
    absl::Status status = call(*shards_->connection(s)->stub());
    if (first_error.ok()) first_error = std::move(status);
  }
  return first_error;
}

absl::Status Client::MutatePriorities(const std::string& table,
                                      absl::Span<const KeyWithPriority> updates,
                                      absl::Span<const uint64_t> deletes,
                                      absl::Duration timeout) {
  MutatePrioritiesRequest request;
  request.set_table(table);
  for (const auto& update : updates) *request.add_updates() = update;
  request.mutable_delete_keys()->Add(deletes.begin(), deletes.end());
  return OnEveryShard([&](ReverbService::StubInterface& stub) {
    grpc::ClientContext context;
    SetDeadline(&context, timeout, /*wait_for_ready=*/true);
    MutatePrioritiesResponse response;
    return FromGrpcStatus(stub.MutatePriorities(&context, request, &response));
  });
}

absl::Status Client::Reset(const std::string& table, absl::Duration timeout) {
  ResetRequest request;
  request.set_table(table);
  return OnEveryShard([&](ReverbService::StubInterface& stub) {
    grpc::ClientContext context;
    SetDeadline(&context, timeout, /*wait_for_ready=*/true);
    ResetResponse response;
    return FromGrpcStatus(stub.Reset(&context, request, &response));
  });
}

std::vector<absl::StatusOr<ServerInfoResponse>> Client::ShardInfo(
    absl::Duration timeout) {
  return AskServerInfo(shards_->connections(),
                       [timeout](int, grpc::ClientContext* context) {
                         SetDeadline(context, timeout, /*wait_for_ready=*/true);
                       });
}

absl::StatusOr<ServerInfoResponse> Client::ServerInfo(absl::Duration timeout) {
  if (shards_->size() == 1) {
    grpc::ClientContext context;
    SetDeadline(&context, timeout, /*wait_for_ready=*/true);
    ServerInfoResponse response;
    grpc::Status status = shards_->connection(0)->stub()->ServerInfo(
        &context, ServerInfoRequest(), &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }
  std::vector<absl::StatusOr<ServerInfoResponse>> infos = ShardInfo(timeout);
  std::vector<ServerInfoResponse> answered;
  for (auto& info : infos) {
    if (info.ok()) answered.push_back(*std::move(info));
  }
  if (answered.empty()) return infos.front().status();
  return MergeServerInfo(answered);
}

absl::StatusOr<std::vector<std::string>> Client::Checkpoint(
    absl::Duration timeout) {
  std::vector<std::string> paths;
  REVERB_RETURN_IF_ERROR(
      OnEveryShard([&](ReverbService::StubInterface& stub) -> absl::Status {
        grpc::ClientContext context;
        SetDeadline(&context, timeout, /*wait_for_ready=*/false);
        CheckpointResponse response;
        grpc::Status status =
            stub.Checkpoint(&context, CheckpointRequest(), &response);
        if (!status.ok()) return FromGrpcStatus(status);
        paths.push_back(response.checkpoint_path());
        return absl::OkStatus();
      }));
  return paths;
}

absl::StatusOr<std::unique_ptr<Writer>> Client::NewWriter(
    const WriterOptions& options) {
  return Writer::Create(shards_, options);
}

absl::StatusOr<std::unique_ptr<TrajectoryWriter>> Client::NewTrajectoryWriter(
    std::shared_ptr<ChunkerOptions> options) {
  return TrajectoryWriter::Create(shards_, std::move(options));
}

absl::StatusOr<std::unique_ptr<Sampler>> Client::NewSampler(
    const std::string& table, const SamplerOptions& options) {
  if (shards_->size() == 1) {
    return Sampler::Create(shards_->connection(0), table, options);
  }
  // The window is per shard (see sampler.h).
  SamplerOptions sharded = options;
  if (sharded.max_in_flight_samples_per_worker > 0) {
    sharded.max_in_flight_samples_per_worker *= shards_->size();
  }
  return Sampler::Create(
      [shards = shards_,
       table]() -> absl::StatusOr<std::unique_ptr<SampleStreamInterface>> {
        return std::make_unique<ShardedSampleStream>(shards, table);
      },
      sharded);
}

absl::StatusOr<std::unique_ptr<SampleStreamInterface>> Client::NewSampleStream(
    const std::string& table, absl::Duration connect_timeout) {
  if (shards_->size() > 1) {
    return std::make_unique<ShardedSampleStream>(shards_, table);
  }
  const auto& connection = shards_->connection(0);
  REVERB_RETURN_IF_ERROR(connection->WaitForConnection(connect_timeout));
  return std::make_unique<SampleStream>(connection, table);
}

}  // namespace deepmind::reverb
