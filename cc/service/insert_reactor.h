// InsertReactor: the server side of one InsertStream (docs/wire-protocol.md,
// "InsertStream").
//
// On the wire: reads InsertStreamRequests as raw bytes (DecodeInsertRequest
// keeps large chunks in the memory gRPC received them in) and writes
// InsertStreamResponses with the keys of the items their tables inserted.
//  - Each request goes to the stream's InsertSession
//    (cc/core/insert_session.h: the chunk map, the items and their chunks,
//    keep_chunk_keys, and its errors), which hands each item to its table.
//  - Each item is confirmed once its table has really inserted it (after
//    the rate limiter allowed it). The confirmations of the items a request
//    inserted at once go out together, after its last item; keys that pile
//    up while a response is being written go out in the next one.
//  - Chunks sent as shared-memory segments are taken by the server's
//    SharedMemoryHost (shared_memory_host.h) and then handled as the others;
//    one it cannot take ends the call.
//  - The first error ends the call with its status: a request that does not
//    parse (INVALID_ARGUMENT), an error of the InsertSession (chunks that
//    would take it past the server's held-chunk limits among them:
//    RESOURCE_EXHAUSTED, see ServerLimits), or an insert its table fails.
//    On an error the session's chunks are released at once.
//  - A call that ends otherwise than OK (those errors, the client cancels or
//    goes, a write fails) withdraws its items still queued (Table::Cancel):
//    what the stream has not confirmed, its tables do not store later, so a
//    writer may send it again elsewhere.
//  - When the client half-closes, the call ends with OK once every item
//    read has been inserted and confirmed.
//
// Flow control: reading pauses while the stream has
// max(1, min(max_size / 10, 1000)) inserts queued (max_size of the table of
// the last item read), and resumes as they complete: a rate-limited table
// back-pressures the writer through gRPC.
//
// Threading and lifetime: see stream_reactor.h. Made by
// ReverbServiceImpl::InsertStream; the service must outlive it.
#ifndef REVERB_CC_SERVICE_INSERT_REACTOR_H_
#define REVERB_CC_SERVICE_INSERT_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cc/core/insert_session.h"
#include "cc/core/table.h"
#include "cc/service/service_metrics.h"
#include "cc/service/shared_memory_host.h"
#include "cc/service/stream_reactor.h"
#include "cc/support/byte_budget.h"
#include "cc/wire/insert_request.h"
#include "grpcpp/support/byte_buffer.h"

namespace deepmind::reverb {

class ReverbServiceImpl;

class InsertReactor
    : public StreamReactor<InsertReactor, grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts reading. Tables are looked up in `service`.
  explicit InsertReactor(const ReverbServiceImpl* service);
  // Removes the shared-memory directories of the stream's writer (see
  // SharedMemoryHost::ForgetStream).
  ~InsertReactor() override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;

 private:
  // Decodes request_bytes_ and acts on it. Without the mutex.
  absl::Status ProcessRequest();
  // Queues `item` into `table`, counting it as pending; CANCELLED if the
  // call is failing. Without the mutex.
  absl::Status Insert(const std::shared_ptr<Table>& table, TableItem item);
  // The insert of item `key`, queued at `queued`, is done.
  void OnInserted(uint64_t key, const absl::Status& status, absl::Time queued)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // Writes the confirmed keys, unless a write is in flight or confirmations
  // are held back.
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // Finishes with OK once the client is done and everything is confirmed.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // Withdraws the inserts still queued (see stream_reactor.h).
  void OnFailingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  friend StreamReactor;

  ServiceMetrics* const metrics_;
  SharedMemoryHost* const shared_memory_;  // Null if the server has none.
  const ServiceMetrics::OpenStream open_stream_;
  grpc::ByteBuffer request_bytes_;
  DecodedInsertRequest request_;
  // The bytes of the session's chunks, against the server's limits.
  ByteBudget::Account held_bytes_;
  // Used by OnReadDone only.
  InsertSession session_;
  // The directories the writer's shared-memory chunks came from.
  std::vector<std::string> writer_dirs_;

  // The stream's inserts, and the tables it has queued them into.
  const Table::Cancellation cancellation_ =
      std::make_shared<std::atomic<bool>>(false);
  std::vector<std::shared_ptr<Table>> tables_ ABSL_GUARDED_BY(guard_->mu);
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(guard_->mu);
  std::vector<uint64_t> confirmed_keys_ ABSL_GUARDED_BY(guard_->mu);
  int64_t pending_inserts_ ABSL_GUARDED_BY(guard_->mu) = 0;
  int64_t max_pending_inserts_ ABSL_GUARDED_BY(guard_->mu) = 1;
  bool read_paused_ ABSL_GUARDED_BY(guard_->mu) = false;
  bool reads_done_ ABSL_GUARDED_BY(guard_->mu) = false;
  // Set while a request's items are being queued (see ProcessRequest).
  bool holding_confirmations_ ABSL_GUARDED_BY(guard_->mu) = false;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_INSERT_REACTOR_H_
