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
#include "cc/core/table.h"
#include "cc/support/status_macros.h"
#include "cc/wire/grpc_status.h"
#include "google/protobuf/arena.h"

namespace deepmind::reverb {
namespace {

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout,
                 bool wait_for_ready) {
  context->set_wait_for_ready(wait_for_ready);
  if (timeout != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
}

// Adds a KeyWithPriority to `request`'s updates for each key.
void AddKeysWithPriorities(absl::Span<const uint64_t> keys,
                           absl::Span<const double> priorities,
                           MutatePrioritiesRequest* request) {
  request->mutable_updates()->Reserve(static_cast<int>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    KeyWithPriority* update = request->add_updates();
    update->set_key(keys[i]);
    update->set_priority(priorities[i]);
  }
}

}  // namespace

Client::Client(const std::string& server_address)
    : shards_(*Shards::Create({server_address})) {}

Client::Client(std::shared_ptr<Shards> shards) : shards_(std::move(shards)) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(
    std::vector<std::string> server_addresses, absl::Duration keepalive,
    std::optional<ChannelSecurity> security) {
  REVERB_ASSIGN_OR_RETURN(std::shared_ptr<Shards> shards,
                          Shards::Create(std::move(server_addresses), keepalive,
                                         std::move(security)));
  return std::unique_ptr<Client>(new Client(std::move(shards)));
}

absl::Status Client::ShardDown(int shard) const {
  return shards_->connection(shard)->Explain(absl::UnavailableError(
      absl::StrCat("Shard ", shards_->address(shard),
                   " is down (it did not answer the client's last call); it "
                   "is asked again in the background.")));
}

template <typename Call>
absl::Status Client::OnEveryShard(Call call, absl::Duration timeout,
                                  bool wait_for_ready, bool down_is_error) {
  if (shards_->size() == 1) {
    const Connection& connection = *shards_->connection(0);
    grpc::ClientContext context;
    if (timeout == absl::InfiniteDuration()) {
      REVERB_RETURN_IF_ERROR(connection.WaitForConnection(kConnectTimeout));
      wait_for_ready = false;
    } else if (wait_for_ready) {
      // What the call would wait for, but a failed handshake ends it now.
      const absl::Time start = absl::Now();
      absl::Status connected = connection.WaitForConnection(timeout);
      if (absl::IsUnauthenticated(connected)) return connected;
      timeout = std::max(absl::ZeroDuration(), timeout - (absl::Now() - start));
    }
    SetDeadline(&context, timeout, wait_for_ready);
    return connection.Explain(call(0, *connection.stub(), &context));
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
      SetDeadline(&context, timeout, wait_for_ready);
      status = call(s, *shards_->connection(s)->stub(), &context);
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
                                      absl::Span<const uint64_t> keys,
                                      absl::Span<const double> priorities,
                                      absl::Span<const uint64_t> deletes,
                                      absl::Duration timeout) {
  if (keys.size() != priorities.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MutatePriorities got ", keys.size(), " keys and ",
                     priorities.size(), " priorities."));
  }
  // What each shard gets: with one shard, the arguments; with several,
  // each key goes to the shard it was sampled from, if known; else to all.
  struct ShardChanges {
    PriorityArrays updates;
    std::vector<uint64_t> deletes;
  };
  const int n = shards_->size();
  std::vector<ShardChanges> routed(n > 1 ? n : 0);
  auto route = [&](uint64_t key, auto add) {
    const int shard = shards_->sampled_keys().ShardOf(key);
    if (shard >= 0) {
      add(routed[shard]);
    } else {
      for (ShardChanges& changes : routed) add(changes);
    }
  };
  if (n > 1) {
    for (size_t i = 0; i < keys.size(); ++i) {
      route(keys[i], [&](ShardChanges& changes) {
        changes.updates.keys.push_back(keys[i]);
        changes.updates.priorities.push_back(priorities[i]);
      });
    }
    for (uint64_t key : deletes) {
      route(key,
            [&](ShardChanges& changes) { changes.deletes.push_back(key); });
    }
  }
  const bool nothing = keys.empty() && deletes.empty();
  return OnEveryShard(
      [&](int shard, ReverbService::StubInterface& stub,
          grpc::ClientContext* context) {
        absl::Span<const uint64_t> to_update = keys;
        absl::Span<const double> to_priorities = priorities;
        absl::Span<const uint64_t> to_delete = deletes;
        if (n > 1) {
          to_update = routed[shard].updates.keys;
          to_priorities = routed[shard].updates.priorities;
          to_delete = routed[shard].deletes;
        }
        // A shard with nothing to change is not called, unless none has
        // (each then checks that it has the table).
        if (!nothing && to_update.empty() && to_delete.empty()) {
          return absl::OkStatus();
        }
        // A shard in this process (connected: an unreachable one is left
        // to the call, which has the timeout) changes its table directly.
        const Connection& connection = *shards_->connection(shard);
        if (connection.WaitForConnection(absl::ZeroDuration()).ok()) {
          if (auto local = connection.LocalTable(table, timeout)) {
            return local->MutateItems(to_update, to_priorities, to_delete);
          }
        }
        google::protobuf::Arena arena;
        auto* request =
            google::protobuf::Arena::CreateMessage<MutatePrioritiesRequest>(
                &arena);
        request->set_table(table);
        request->mutable_delete_keys()->Add(to_delete.begin(), to_delete.end());
        // Updates go as two arrays to a server that reads them (ours, once
        // it has said so in an answer), else as a message per key.
        const bool arrays = connection.ReadsPriorityArrays();
        if (arrays) {
          request->mutable_update_keys()->Add(to_update.begin(),
                                              to_update.end());
          request->mutable_update_priorities()->Add(to_priorities.begin(),
                                                    to_priorities.end());
        } else {
          AddKeysWithPriorities(to_update, to_priorities, request);
        }
        MutatePrioritiesResponse response;
        REVERB_RETURN_IF_ERROR(FromGrpcStatus(
            stub.MutatePriorities(context, *request, &response)));
        connection.SetReadsPriorityArrays(response.update_arrays_read());
        if (!arrays || response.update_arrays_read() || to_update.empty()) {
          return absl::OkStatus();
        }
        // Another server now answers at this address, one that ignored the
        // arrays (and did the deletes, which change nothing the second
        // time): the updates again, as messages.
        request->clear_update_keys();
        request->clear_update_priorities();
        AddKeysWithPriorities(to_update, to_priorities, request);
        grpc::ClientContext again;
        again.set_deadline(context->deadline());
        return FromGrpcStatus(
            stub.MutatePriorities(&again, *request, &response));
      },
      timeout, /*wait_for_ready=*/true, /*down_is_error=*/false);
}

absl::Status Client::MutatePriorities(const std::string& table,
                                      absl::Span<const KeyWithPriority> updates,
                                      absl::Span<const uint64_t> deletes,
                                      absl::Duration timeout) {
  const PriorityArrays arrays = PriorityArrays::From(updates);
  return MutatePriorities(table, arrays.keys, arrays.priorities, deletes,
                          timeout);
}

absl::Status Client::Reset(const std::string& table, absl::Duration timeout) {
  ResetRequest request;
  request.set_table(table);
  return OnEveryShard(
      [&](int, ReverbService::StubInterface& stub,
          grpc::ClientContext* context) {
        ResetResponse response;
        return FromGrpcStatus(stub.Reset(context, request, &response));
      },
      timeout, /*wait_for_ready=*/true, /*down_is_error=*/true);
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

std::vector<absl::StatusOr<ServerInfoResponse>> Client::AskInfo(
    absl::Duration timeout, bool skip_down) {
  const bool bounded = timeout == absl::InfiniteDuration();
  if (bounded) timeout = kConnectTimeout;
  std::vector<absl::StatusOr<ServerInfoResponse>> infos;
  if (shards_->size() == 1) {
    const absl::Time deadline = absl::Now() + timeout;
    const Connection& connection = *shards_->connection(0);
    absl::Status connected = connection.WaitForConnection(timeout);
    if (absl::IsUnauthenticated(connected)) return {connected};
    infos = AskServerInfo(shards_->connections(),
                          [deadline](int, grpc::ClientContext* context) {
                            context->set_wait_for_ready(true);
                            context->set_deadline(absl::ToChronoTime(deadline));
                          });
    // A handshake the server refuses only after the client's side of it
    // completed (a missing client certificate under TLS 1.3) fails the
    // call instead of the wait.
    if (!infos[0].ok()) infos[0] = connection.Explain(infos[0].status());
  } else {
    infos = AskShards(timeout, skip_down);
  }
  if (bounded) {
    for (int s = 0; s < shards_->size(); ++s) {
      if (absl::IsDeadlineExceeded(infos[s].status())) {
        infos[s] = absl::UnavailableError(
            absl::StrCat("The Reverb server at ", shards_->address(s),
                         " did not answer within ",
                         absl::FormatDuration(kConnectTimeout), "."));
      }
    }
  }
  return infos;
}

std::vector<absl::StatusOr<ServerInfoResponse>> Client::ShardInfo(
    absl::Duration timeout) {
  return AskInfo(timeout, /*skip_down=*/true);
}

absl::StatusOr<ServerInfoResponse> Client::ServerInfo(absl::Duration timeout) {
  if (shards_->size() == 1) return std::move(ShardInfo(timeout).front());
  bool any_up = false;
  for (int s = 0; s < shards_->size(); ++s) any_up = any_up || shards_->IsUp(s);
  std::vector<absl::StatusOr<ServerInfoResponse>> infos =
      AskInfo(timeout, /*skip_down=*/any_up);
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
      [&](int, ReverbService::StubInterface& stub,
          grpc::ClientContext* context) -> absl::Status {
        CheckpointResponse response;
        grpc::Status status =
            stub.Checkpoint(context, CheckpointRequest(), &response);
        if (!status.ok()) return FromGrpcStatus(status);
        paths.push_back(response.checkpoint_path());
        return absl::OkStatus();
      },
      timeout, /*wait_for_ready=*/false, /*down_is_error=*/true));
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
  sharded.max_in_flight_bytes_per_worker *= shards_->size();
  return Sampler::Create(
      [shards = shards_,
       table]() -> absl::StatusOr<std::unique_ptr<SampleStreamInterface>> {
        return std::make_unique<ShardedSampleStream>(shards, table);
      },
      sharded);
}

absl::StatusOr<std::unique_ptr<SampleStreamInterface>> Client::NewSampleStream(
    const std::string& table, absl::Duration timeout) {
  if (shards_->size() > 1) {
    return std::make_unique<ShardedSampleStream>(shards_, table);
  }
  const auto& connection = shards_->connection(0);
  if (timeout < kConnectTimeout) {
    absl::Status connected = connection->WaitForConnection(timeout);
    if (absl::IsUnauthenticated(connected)) return connected;
    if (!connected.ok()) {
      return absl::DeadlineExceededError(
          absl::StrCat("Could not connect to the Reverb server at ",
                       connection->server_address(), " within the timeout of ",
                       absl::FormatDuration(timeout), "."));
    }
  } else {
    REVERB_RETURN_IF_ERROR(connection->WaitForConnection(kConnectTimeout));
  }
  if (auto local = connection->LocalTable(table, timeout)) {
    return std::make_unique<LocalSampleStream>(std::move(local));
  }
  return std::make_unique<SampleStream>(connection, table);
}

}  // namespace deepmind::reverb
