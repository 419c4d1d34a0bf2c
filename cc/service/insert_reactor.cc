#include "cc/service/insert_reactor.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "cc/core/table_item.h"
#include "cc/service/server_limits.h"
#include "cc/service/service.h"
#include "cc/support/mutex.h"
#include "cc/support/status_macros.h"
#include "cc/wire/grpc_status.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {

InsertReactor::InsertReactor(const ReverbServiceImpl* service)
    : StreamReactor(service->open_streams(), service->finishing_streams()),
      metrics_(service->metrics()),
      shared_memory_(service->shared_memory()),
      open_stream_(&metrics_->open_insert_streams),
      held_bytes_(service->held_chunk_bytes(),
                  service->limits().max_held_chunk_bytes_per_stream,
                  "max_held_chunk_bytes_per_stream"),
      session_(
          [service](const std::string& name) {
            return service->FindTable(name);
          },
          &held_bytes_) {
  Start(&request_bytes_);
}

void InsertReactor::OnReadDone(bool ok) {
  if (!ok) {
    MutexLock lock(&guard_->mu);
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  absl::Status status = ProcessRequest();
  if (!status.ok()) session_.Clear();
  MutexLock lock(&guard_->mu);
  if (!status.ok()) {
    FinishOnce(ToGrpcStatus(status));
    return;
  }
  if (finishing()) return;
  if (pending_inserts_ < max_pending_inserts_) {
    StartRead(&request_bytes_);
  } else {
    read_paused_ = true;
  }
}

void InsertReactor::OnWriteDone(bool ok) {
  MutexLock lock(&guard_->mu);
  if (!WriteDone(ok)) return;
  MaybeWriteLocked();
  MaybeFinishLocked();
}

InsertReactor::~InsertReactor() {
  if (!writer_dirs_.empty()) shared_memory_->ForgetStream(writer_dirs_);
}

absl::Status InsertReactor::ProcessRequest() {
  REVERB_RETURN_IF_ERROR(DecodeInsertRequest(request_bytes_, &request_));
  request_bytes_.Clear();
  for (const SharedMemoryChunk& shared : request_.shared_chunks) {
    if (shared_memory_ == nullptr) {
      return absl::InvalidArgumentError(
          "This server takes no shared-memory chunks.");
    }
    REVERB_ASSIGN_OR_RETURN(auto chunk,
                            shared_memory_->Accept(shared, &writer_dirs_));
    request_.chunks.push_back(std::move(chunk));
  }
  // Confirmations of the inserts made right away (on this thread) go out
  // together once every item of the request is in, not one response each.
  {
    MutexLock lock(&guard_->mu);
    holding_confirmations_ = true;
  }
  absl::Status status = session_.Process(
      std::move(request_.chunks), absl::MakeSpan(request_.items),
      request_.keep_chunk_keys,
      [this](const std::shared_ptr<Table>& table, TableItem item) {
        return Insert(table, std::move(item));
      });
  if (absl::IsResourceExhausted(status)) status = HeldChunksExhausted(status);
  MutexLock lock(&guard_->mu);
  holding_confirmations_ = false;
  MaybeWriteLocked();
  return status;
}

absl::Status InsertReactor::Insert(const std::shared_ptr<Table>& table,
                                   TableItem item) {
  const uint64_t key = item.item.key();
  {
    MutexLock lock(&guard_->mu);
    // Failing: the items queued are being withdrawn, so are these.
    if (finishing()) return absl::CancelledError("The stream has ended.");
    if (std::find(tables_.begin(), tables_.end(), table) == tables_.end()) {
      tables_.push_back(table);
    }
    ++pending_inserts_;
    // As dm-reverb: pause reading at 10% of the table (1..1000 items).
    max_pending_inserts_ =
        std::max<int64_t>(1, std::min<int64_t>(table->max_size() / 10, 1000));
  }
  table->InsertOrAssignAsync(
      std::move(item),
      [guard = guard_, key, queued = absl::Now()](const absl::Status& s) {
        MutexLock lock(&guard->mu);
        if (guard->reactor != nullptr) {
          guard->reactor->OnInserted(key, s, queued);
        }
      },
      cancellation_);
  return absl::OkStatus();
}

void InsertReactor::OnInserted(uint64_t key, const absl::Status& status,
                               absl::Time queued) {
  --pending_inserts_;
  if (!status.ok()) {
    FinishOnce(ToGrpcStatus(status));
    return;
  }
  metrics_->insert_latency.Observe(absl::Now() - queued);
  confirmed_keys_.push_back(key);
  MaybeWriteLocked();
  if (read_paused_ && !finishing() && pending_inserts_ < max_pending_inserts_) {
    read_paused_ = false;
    StartRead(&request_bytes_);
  }
  MaybeFinishLocked();
}

void InsertReactor::MaybeWriteLocked() {
  if (holding_confirmations_ || write_in_flight() || finishing() ||
      confirmed_keys_.empty()) {
    return;
  }
  InsertStreamResponse response;
  response.mutable_keys()->Add(confirmed_keys_.begin(), confirmed_keys_.end());
  confirmed_keys_.clear();
  bool own_buffer;
  response_.Clear();
  grpc::SerializationTraits<InsertStreamResponse>::Serialize(
      response, &response_, &own_buffer);
  StartWriteOf(&response_);
}

void InsertReactor::OnFailingLocked() {
  for (const auto& table : tables_) table->Cancel(cancellation_);
}

void InsertReactor::MaybeFinishLocked() {
  if (reads_done_ && pending_inserts_ == 0 && confirmed_keys_.empty() &&
      !write_in_flight()) {
    FinishOnce(grpc::Status::OK);
  }
}

}  // namespace deepmind::reverb
