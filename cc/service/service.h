// ReverbServiceImpl: the gRPC service over a set of tables (callback API, no
// thread per stream).
//
//  - InsertStream keeps the chunks a stream sent in a per-stream map until
//    an item references them or they are no longer in `keep_chunk_keys`;
//    each item is confirmed once its table has really inserted it. Reading
//    pauses while a stream has many inserts queued in its table
//    (back-pressure). See insert_reactor.h.
//  - SampleStream serves each request in growing table batches (64, 128, ...)
//    and writes responses of about 2 MB; a sample may span responses. See
//    sample_reactor.h.
//  - MutatePriorities, Reset, ServerInfo, Checkpoint are unary. A checkpoint
//    is saved on a thread of its own (one at a time), not on gRPC's.
//    MutatePriorities parses its request onto an arena (arena_messages.h):
//    no allocation per key.
//  - InitializeConnection hands a table, by address, to a client of this
//    libreverb in the server's process, which then uses it directly (see
//    initialize_connection_reactor.h); other clients get address 0 and use
//    the gRPC path.
//  - What one client may cost is bounded by ServerLimits
//    (server_limits.h): the chunks insert streams keep (a ByteBudget shared
//    by the streams), the samples of a request, a stalled sample stream.
//  - SharedMemorySession offers clients on the server's host chunks as
//    shared-memory segments instead of bytes, both ways
//    (shared_memory_host.h).
//  - With an auth token, every call without it ends at once with
//    UNAUTHENTICATED (auth_token.h).
//
// Every bad request ends its own call with a status; tables and other calls
// are unaffected.
#ifndef REVERB_CC_SERVICE_SERVICE_H_
#define REVERB_CC_SERVICE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/checkpointing/checkpointer.h"
#include "cc/core/table.h"
#include "cc/service/arena_messages.h"
#include "cc/service/auth_token.h"
#include "cc/service/server_limits.h"
#include "cc/service/service_metrics.h"
#include "cc/service/shared_memory_host.h"
#include "cc/support/byte_budget.h"
#include "cc/support/export.h"
#include "cc/support/task_executor.h"
#include "reverb/cc/reverb_service.grpc.pb.h"

namespace deepmind::reverb {

// ReverbService::CallbackService with InsertStream and SampleStream on raw
// bytes.
using ReverbCallbackServiceBase = ReverbService::WithCallbackMethod_Checkpoint<
    ReverbService::WithRawCallbackMethod_InsertStream<
        ReverbService::WithCallbackMethod_MutatePriorities<
            ReverbService::WithCallbackMethod_Reset<
                ReverbService::WithRawCallbackMethod_SampleStream<
                    ReverbService::WithCallbackMethod_ServerInfo<
                        ReverbService::WithCallbackMethod_InitializeConnection<
                            ReverbService::
                                WithCallbackMethod_SharedMemorySession<
                                    ReverbService::Service>>>>>>>>;

class REVERB_EXPORT ReverbServiceImpl : public ReverbCallbackServiceBase {
 public:
  // Size of a sample response after which a new one is started.
  static constexpr int64_t kMaxSampleResponseBytes = 2 << 20;
  // First table batch of a sample request; later batches double.
  static constexpr int32_t kInitialSampleBatchSize = 64;
  // Table batches are not requested while this many responses wait.
  static constexpr int kMaxQueuedResponses = 3;
  // Nor, on a stream that gets chunks as bytes, while its responses (being
  // written or waiting) hold this much; a batch takes at most the room
  // left. A stream whose client stopped reading holds no more (with
  // batches of Table::kMaxSampleBatchBytes and three responses, it could
  // hold 8 MiB).
  static constexpr int64_t kMaxQueuedSampleBytes = 3 << 20;
  // The chunk bytes a table batch of a stream that borrows shared memory may
  // reference (Table::kMaxSampleBatchBytes for others): its large chunks
  // are lent, a link each, not copied into responses, and each batch costs
  // a hand-over between three server threads.
  static constexpr int64_t kMaxLentSampleBatchBytes = 16 << 20;

  // INVALID_ARGUMENT if a table is null or two share a name, or a limit is
  // not positive. `checkpointer` may be null (Checkpoint then answers
  // INVALID_ARGUMENT). `auth_token`: the token every call must carry (empty:
  // none).
  static absl::StatusOr<std::unique_ptr<ReverbServiceImpl>> Create(
      std::vector<std::shared_ptr<Table>> tables,
      std::shared_ptr<Checkpointer> checkpointer = nullptr,
      ServerLimits limits = ServerLimits(), std::string auth_token = "");

  // Closes every table: waiting requests end with CANCELLED, which their
  // streams answer; waits (up to kCloseGrace) for those answers to be
  // handed to gRPC, so that a server shut down next still delivers them
  // (and its clients see the end, not a lost connection to retry).
  void Close();
  static constexpr absl::Duration kCloseGrace = absl::Seconds(2);

  // NOT_FOUND "Priority table X was not found" if there is none.
  absl::StatusOr<std::shared_ptr<Table>> FindTable(
      const std::string& name) const;

  const std::vector<std::shared_ptr<Table>>& tables() const { return tables_; }
  TaskExecutor* executor() { return &executor_; }

  // InsertStream and SampleStream calls whose reactor has not finished
  // (and so may hold chunks, or requests queued at a table): the streams of
  // clients that froze or vanished leave this count once the server's
  // keepalive finds them out (server.h).
  int64_t num_open_streams() const {
    return open_streams_.load(std::memory_order_relaxed);
  }
  // What the stream reactors count themselves in.
  std::atomic<int64_t>* open_streams() const { return &open_streams_; }
  std::atomic<int64_t>* finishing_streams() const {
    return &finishing_streams_;
  }

  // What the calls count for metrics (service_metrics.h).
  ServiceMetrics* metrics() const { return &metrics_; }
  // Null if the service has none.
  const std::shared_ptr<Checkpointer>& checkpointer() const {
    return checkpointer_;
  }

  const ServerLimits& limits() const { return limits_; }
  // The chunk bytes insert streams keep, against max_held_chunk_bytes; each
  // stream holds an account of it.
  ByteBudget* held_chunk_bytes() const { return &held_chunk_bytes_; }

  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* context,
                                       const CheckpointRequest* request,
                                       CheckpointResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InsertStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* MutatePriorities(
      grpc::CallbackServerContext* context,
      const MutatePrioritiesRequest* request,
      MutatePrioritiesResponse* response) override;
  grpc::ServerUnaryReactor* Reset(grpc::CallbackServerContext* context,
                                  const ResetRequest* request,
                                  ResetResponse* response) override;
  // Raw bytes: responses are encoded without copying chunks (see
  // chunk_encoding.h); the wire format is SampleStreamRequest/Response's.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SampleStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* context,
                                       const ServerInfoRequest* request,
                                       ServerInfoResponse* response) override;
  grpc::ServerBidiReactor<InitializeConnectionRequest,
                          InitializeConnectionResponse>*
  InitializeConnection(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* SharedMemorySession(
      grpc::CallbackServerContext* context,
      const SharedMemorySessionRequest* request,
      SharedMemorySessionResponse* response) override;

  // Null if the service offers no shared memory (shared_memory_host.h).
  SharedMemoryHost* shared_memory() const { return shared_memory_.get(); }

 private:
  ReverbServiceImpl(std::vector<std::shared_ptr<Table>> tables,
                    std::shared_ptr<Checkpointer> checkpointer,
                    ServerLimits limits, std::string auth_token);

  // Null if `context` carries the auth token (or none is required); else
  // a reactor that refused the call.
  grpc::ServerUnaryReactor* RefuseUnary(
      grpc::CallbackServerContext* context) const;
  template <typename Request, typename Response>
  grpc::ServerBidiReactor<Request, Response>* RefuseStream(
      const grpc::CallbackServerContext& context) const {
    absl::Status allowed = auth_token_.Check(context);
    return allowed.ok() ? nullptr
                        : new RefusedStreamReactor<Request, Response>(allowed);
  }

  const std::vector<std::shared_ptr<Table>> tables_;
  const std::shared_ptr<Checkpointer> checkpointer_;
  const AuthToken auth_token_;
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> tables_by_name_;
  // Random id of this service instance; clients re-read signatures when it
  // changes.
  Uint128 tables_state_id_;
  // Runs table sample callbacks off the table workers.
  TaskExecutor executor_;
  // Saves checkpoints, one at a time.
  TaskExecutor checkpoint_executor_;
  mutable std::atomic<int64_t> open_streams_{0};
  const ServerLimits limits_;
  mutable ByteBudget held_chunk_bytes_;
  mutable std::atomic<int64_t> finishing_streams_{0};
  mutable ServiceMetrics metrics_;
  ArenaMessages<MutatePrioritiesRequest, MutatePrioritiesResponse>
      mutate_messages_;
  // Made last, removed first: the names it removes are no longer served.
  const std::unique_ptr<SharedMemoryHost> shared_memory_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SERVICE_H_
