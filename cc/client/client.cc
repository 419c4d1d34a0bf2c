#include "cc/client/client.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cc/client/ask_server_info.h"
#include "cc/client/local_sample_stream.h"
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

absl::Status Client::ShardDown(int shard) const {
  return absl::UnavailableError(
      absl::StrCat("Shard ", shards_->address(shard),
                   " is down (it did not answer the client's last call); it "
                   "is asked again in the background."));
}

template <typename Call>
absl::Status Client::OnEveryShard(Call call, bool down_is_error) {
  if (shards_->size() == 1) {
    grpc::ClientContext context;
    return call(*shards_->connection(0)->stub(), &context);
  }
  absl::Status first_error;
  for (int s = 0; s < shards_->size(); ++s) {
    grpc::ClientContext context;
    std::atomic<bool> down = false;
    // Watched before IsUp is read, so that no transition is missed.
    const int64_t watch = shards_->Watch(s, [&] {
      down = true;
      context.TryCancel();
    });
    absl::Status status = ShardDown(s);
    if (shards_->IsUp(s)) {
      status = call(*shards_->connection(s)->stub(), &context);
    } else {
      down = true;
    }
    shards_->Unwatch(watch);
    // Down before or during the call (a call that succeeded still counts).
    if (down && !status.ok()) {
      status = down_is_error ? ShardDown(s) : absl::OkStatus();
    }
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
  return OnEveryShard(
      [&](ReverbService::StubInterface& stub, grpc::ClientContext* context) {
        SetDeadline(context, timeout, /*wait_for_ready=*/true);
        MutatePrioritiesResponse response;
        return FromGrpcStatus(
            stub.MutatePriorities(context, request, &response));
      },
      /*down_is_error=*/false);
}

absl::Status Client::Reset(const std::string& table, absl::Duration timeout) {
  ResetRequest request;
  request.set_table(table);
  return OnEveryShard(
      [&](ReverbService::StubInterface& stub, grpc::ClientContext* context) {
        SetDeadline(context, timeout, /*wait_for_ready=*/true);
        ResetResponse response;
        return FromGrpcStatus(stub.Reset(context, request, &response));
      },
      /*down_is_error=*/true);
}

std::vector<absl::StatusOr<ServerInfoResponse>> Client::AskShards(
    absl::Duration timeout, bool skip_down) {
  const absl::Time deadline = timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + timeout;
  std::vector<absl::StatusOr<ServerInfoResponse>> infos(shards_->size());
  std::vector<int> pending(shards_->size());
  for (int s = 0; s < shards_->size(); ++s) pending[s] = s;
  while (!pending.empty()) {
    std::vector<int> asked;
    std::vector<std::shared_ptr<const Connection>> connections;
    for (int s : pending) {
      if (skip_down && !shards_->IsUp(s)) {
        infos[s] = ShardDown(s);
      } else {
        asked.push_back(s);
        connections.push_back(shards_->connection(s));
      }
    }
    pending.clear();
    // In slices (unless every shard is asked, down or not), so that a shard
    // found down meanwhile is dropped at the end of the slice.
    const absl::Time until =
        skip_down ? std::min(deadline, absl::Now() + kServerInfoSlice)
                  : deadline;
    std::vector<absl::StatusOr<ServerInfoResponse>> answers =
        AskServerInfo(connections, [until](int, grpc::ClientContext* context) {
          context->set_wait_for_ready(true);
          if (until != absl::InfiniteFuture()) {
            context->set_deadline(absl::ToChronoTime(until));
          }
        });
    for (size_t i = 0; i < asked.size(); ++i) {
      if (absl::IsDeadlineExceeded(answers[i].status()) &&
          absl::Now() < deadline) {
        pending.push_back(asked[i]);
      } else {
        infos[asked[i]] = std::move(answers[i]);
      }
    }
  }
  return infos;
}

std::vector<absl::StatusOr<ServerInfoResponse>> Client::ShardInfo(
    absl::Duration timeout) {
  if (shards_->size() == 1) {
    return AskServerInfo(shards_->connections(),
                         [timeout](int, grpc::ClientContext* context) {
                           SetDeadline(context, timeout,
                                       /*wait_for_ready=*/true);
                         });
  }
  return AskShards(timeout, /*skip_down=*/true);
}

absl::StatusOr<ServerInfoResponse> Client::ServerInfo(absl::Duration timeout) {
  if (shards_->size() == 1) return std::move(ShardInfo(timeout).front());
  bool any_up = false;
  for (int s = 0; s < shards_->size(); ++s) any_up = any_up || shards_->IsUp(s);
  std::vector<absl::StatusOr<ServerInfoResponse>> infos =
      AskShards(timeout, /*skip_down=*/any_up);
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
  REVERB_RETURN_IF_ERROR(OnEveryShard(
      [&](ReverbService::StubInterface& stub,
          grpc::ClientContext* context) -> absl::Status {
        SetDeadline(context, timeout, /*wait_for_ready=*/false);
        CheckpointResponse response;
        grpc::Status status =
            stub.Checkpoint(context, CheckpointRequest(), &response);
        if (!status.ok()) return FromGrpcStatus(status);
        paths.push_back(response.checkpoint_path());
        return absl::OkStatus();
      },
      /*down_is_error=*/true));
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
  if (auto local = connection->LocalTable(table)) {
    return std::make_unique<LocalSampleStream>(std::move(local));
  }
  return std::make_unique<SampleStream>(connection, table);
}

}  // namespace deepmind::reverb
