#include "cc/service/service.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cc/core/errors.h"
#include "cc/service/initialize_connection_reactor.h"
#include "cc/service/insert_reactor.h"
#include "cc/service/sample_reactor.h"
#include "cc/support/status_macros.h"
#include "cc/wire/grpc_status.h"

namespace deepmind::reverb {
namespace {

constexpr int kNumExecutorThreads = 4;

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

CheckpointProgress ToProto(const SaveProgress::Snapshot& snapshot) {
  CheckpointProgress progress;
  progress.set_saving(snapshot.saving);
  progress.set_bytes_done(snapshot.bytes_done);
  progress.set_bytes_total(snapshot.bytes_total);
  progress.set_elapsed_ms(absl::ToInt64Milliseconds(snapshot.elapsed));
  progress.set_saves(snapshot.saves);
  progress.set_failures(snapshot.failures);
  return progress;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReverbServiceImpl>> ReverbServiceImpl::Create(
    std::vector<std::shared_ptr<Table>> tables,
    std::shared_ptr<Checkpointer> checkpointer, ServerLimits limits,
    std::string auth_token) {
  REVERB_RETURN_IF_ERROR(ValidateServerLimits(limits));
  absl::flat_hash_set<std::string> names;
  for (const auto& table : tables) {
    if (table == nullptr) {
      return absl::InvalidArgumentError("Tables must not be null.");
    }
    if (!names.insert(table->name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Table names must be unique; '", table->name(),
                       "' is used more than once."));
    }
  }
  return std::unique_ptr<ReverbServiceImpl>(
      new ReverbServiceImpl(std::move(tables), std::move(checkpointer), limits,
                            std::move(auth_token)));
}

ReverbServiceImpl::ReverbServiceImpl(std::vector<std::shared_ptr<Table>> tables,
                                     std::shared_ptr<Checkpointer> checkpointer,
                                     ServerLimits limits,
                                     std::string auth_token)
    : tables_(std::move(tables)),
      checkpointer_(std::move(checkpointer)),
      auth_token_(std::move(auth_token)),
      executor_(kNumExecutorThreads, "reverb-respond"),
      checkpoint_executor_(1, "reverb-ckpt"),
      limits_(limits),
      held_chunk_bytes_(limits.max_held_chunk_bytes, "max_held_chunk_bytes"),
      shared_memory_(SharedMemoryHost::Create()) {
  for (const auto& table : tables_) tables_by_name_[table->name()] = table;
  SetMessageAllocatorFor_MutatePriorities(&mutate_messages_);
  absl::BitGen gen;
  tables_state_id_.set_high(absl::Uniform<uint64_t>(gen));
  tables_state_id_.set_low(absl::Uniform<uint64_t>(gen));
}

void ReverbServiceImpl::Close() {
  for (const auto& table : tables_) table->Close();
  // The tables' last answers reach the streams through the executor.
  executor_.AwaitIdle();
  const absl::Time deadline = absl::Now() + kCloseGrace;
  while (finishing_streams_.load() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

grpc::ServerUnaryReactor* ReverbServiceImpl::RefuseUnary(
    grpc::CallbackServerContext* context) const {
  absl::Status allowed = auth_token_.Check(*context);
  return allowed.ok() ? nullptr : FinishUnary(context, allowed);
}

absl::StatusOr<std::shared_ptr<Table>> ReverbServiceImpl::FindTable(
    const std::string& name) const {
  auto it = tables_by_name_.find(name);
  if (it == tables_by_name_.end()) {
    return TableNotFound(name);
  }
  return it->second;
}

grpc::ServerUnaryReactor* ReverbServiceImpl::Checkpoint(
    grpc::CallbackServerContext* context, const CheckpointRequest*,
    CheckpointResponse* response) {
  if (auto* refused = RefuseUnary(context)) return refused;
  if (checkpointer_ == nullptr) {
    return FinishUnary(context, absl::InvalidArgumentError(
                                    "no Checkpointer configured for the "
                                    "replay service."));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  checkpoint_executor_.Schedule([this, reactor, response] {
    absl::StatusOr<std::string> path = checkpointer_->Save(tables_);
    if (path.ok()) response->set_checkpoint_path(*path);
    reactor->Finish(ToGrpcStatus(path.status()));
  });
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
ReverbServiceImpl::InsertStream(grpc::CallbackServerContext* context) {
  if (auto* refused =
          RefuseStream<grpc::ByteBuffer, grpc::ByteBuffer>(*context)) {
    return refused;
  }
  return new InsertReactor(this);
}

grpc::ServerUnaryReactor* ReverbServiceImpl::MutatePriorities(
    grpc::CallbackServerContext* context,
    const MutatePrioritiesRequest* request,
    MutatePrioritiesResponse* response) {
  if (auto* refused = RefuseUnary(context)) return refused;
  auto table = FindTable(request->table());
  if (!table.ok()) return FinishUnary(context, table.status());
  if (request->update_keys_size() != request->update_priorities_size()) {
    return FinishUnary(
        context, absl::InvalidArgumentError(absl::StrCat(
                     "MutatePriorities got ", request->update_keys_size(),
                     " update keys and ", request->update_priorities_size(),
                     " update priorities.")));
  }
  response->set_update_arrays_read(true);
  absl::Span<const uint64_t> keys = request->update_keys();
  absl::Span<const double> priorities = request->update_priorities();
  // `updates` (a dm-reverb client's) come first.
  PriorityArrays arrays;
  if (request->updates_size() > 0) {
    arrays = PriorityArrays::From(request->updates());
    arrays.keys.insert(arrays.keys.end(), keys.begin(), keys.end());
    arrays.priorities.insert(arrays.priorities.end(), priorities.begin(),
                             priorities.end());
    keys = arrays.keys;
    priorities = arrays.priorities;
  }
  const absl::Time start = absl::Now();
  absl::Status status =
      (*table)->MutateItems(keys, priorities, request->delete_keys());
  metrics_.mutate_latency.Observe(absl::Now() - start);
  return FinishUnary(context, status);
}

grpc::ServerUnaryReactor* ReverbServiceImpl::Reset(
    grpc::CallbackServerContext* context, const ResetRequest* request,
    ResetResponse*) {
  if (auto* refused = RefuseUnary(context)) return refused;
  auto table = FindTable(request->table());
  if (table.ok()) (*table)->Reset();
  return FinishUnary(context, table.status());
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
ReverbServiceImpl::SampleStream(grpc::CallbackServerContext* context) {
  if (auto* refused =
          RefuseStream<grpc::ByteBuffer, grpc::ByteBuffer>(*context)) {
    return refused;
  }
  return new SampleReactor(this, context);
}

grpc::ServerUnaryReactor* ReverbServiceImpl::ServerInfo(
    grpc::CallbackServerContext* context, const ServerInfoRequest*,
    ServerInfoResponse* response) {
  if (auto* refused = RefuseUnary(context)) return refused;
  *response->mutable_tables_state_id() = tables_state_id_;
  for (const auto& table : tables_) *response->add_table_info() = table->info();
  if (checkpointer_ != nullptr) {
    *response->mutable_checkpoint_progress() =
        ToProto(checkpointer_->save_progress().Read());
  }
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerBidiReactor<InitializeConnectionRequest,
                        InitializeConnectionResponse>*
ReverbServiceImpl::InitializeConnection(grpc::CallbackServerContext* context) {
  if (auto* refused = RefuseStream<InitializeConnectionRequest,
                                   InitializeConnectionResponse>(*context)) {
    return refused;
  }
  return new InitializeConnectionReactor(this, context->peer());
}

grpc::ServerUnaryReactor* ReverbServiceImpl::SharedMemorySession(
    grpc::CallbackServerContext* context,
    const SharedMemorySessionRequest* request,
    SharedMemorySessionResponse* response) {
  if (auto* refused = RefuseUnary(context)) return refused;
  if (shared_memory_ != nullptr) *response = shared_memory_->Offer(*request);
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace deepmind::reverb
