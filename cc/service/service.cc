#include "cc/service/service.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "cc/support/mutex.h"
#include "cc/wire/insert_request.h"
#include "cc/wire/sample_response.h"
#include "cc/wire/grpc_status.h"
#include "cc/support/status_macros.h"
#include "cc/core/table_item.h"

namespace deepmind::reverb {
namespace {

constexpr int kNumExecutorThreads = 4;
// Sample batches up to this many chunk bytes are serialized on the table
// worker (a thread hop costs more than copying them).
constexpr int64_t kInlineSampleBytes = 64 << 10;

int64_t SampledBytes(const std::vector<SampledItem>& samples) {
  int64_t bytes = 0;
  for (const SampledItem& sample : samples) {
    for (const auto& chunk : sample.ref->chunks) {
      bytes += static_cast<int64_t>(chunk->DataByteSizeLong());
    }
  }
  return bytes;
}

// Reactors are deleted by gRPC's OnDone, but table callbacks may arrive
// later. Callbacks hold the reactor's Guard and act only while `reactor` is
// set; OnDone clears it under the same mutex.
template <typename Reactor>
struct Guard {
  Mutex mu;
  Reactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
};

// A bidi reactor whose table callbacks go through a Guard, and which
// finishes once no write is in flight. Methods other than the gRPC
// reactions are called with the guard's mutex held.
template <typename Derived, typename Request, typename Response>
class StreamReactor : public grpc::ServerBidiReactor<Request, Response> {
 public:
  StreamReactor() : guard_(std::make_shared<Guard<Derived>>()) {}

  void OnCancel() override {
    MutexLock lock(&guard_->mu);
    FinishOnce(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      MutexLock lock(&guard_->mu);
      guard_->reactor = nullptr;
    }
    delete static_cast<Derived*>(this);
  }

 protected:
  // Lets table callbacks reach the reactor, and starts the first read.
  void Start(Request* request) {
    MutexLock lock(&guard_->mu);
    guard_->reactor = static_cast<Derived*>(this);
    this->StartRead(request);
  }

  const std::shared_ptr<Guard<Derived>> guard_;

  // Finishes with `status` unless already finishing; waits for the write in
  // flight, if any.
  void FinishOnce(const grpc::Status& status) {
    if (finish_status_.has_value()) return;
    finish_status_ = status;
    if (!write_in_flight_) this->Finish(status);
  }
  bool finishing() const { return finish_status_.has_value(); }

  void StartWriteOf(const Response* response) {
    write_in_flight_ = true;
    this->StartWrite(response, grpc::WriteOptions().set_no_compression());
  }
  // To be called first by OnWriteDone. False if the reactor is finishing
  // (and has now called Finish).
  bool WriteDone(bool ok) {
    write_in_flight_ = false;
    if (finish_status_.has_value()) {  // Finish was deferred for this write.
      this->Finish(*finish_status_);
      return false;
    }
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED,
                              "Could not write to the stream."));
      return false;
    }
    return true;
  }
  bool write_in_flight() const { return write_in_flight_; }

 private:
  bool write_in_flight_ = false;
  std::optional<grpc::Status> finish_status_;
};

// --- InsertStream --------------------------------------------------------------

// Reads raw bytes (DecodeInsertRequest keeps large chunks in the memory
// gRPC received them in) and writes InsertStreamResponses serialized here.
class InsertReactor : public StreamReactor<InsertReactor, grpc::ByteBuffer,
                                           grpc::ByteBuffer> {
 public:
  explicit InsertReactor(ReverbServiceImpl* service) : service_(service) {
    Start(&request_bytes_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      MutexLock lock(&guard_->mu);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    absl::Status status = ProcessRequest();
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

  void OnWriteDone(bool ok) override {
    MutexLock lock(&guard_->mu);
    if (!WriteDone(ok)) return;
    MaybeWriteLocked();
    MaybeFinishLocked();
  }

 private:
  absl::Status ProcessRequest() {
    REVERB_RETURN_IF_ERROR(DecodeInsertRequest(request_bytes_, &request_));
    request_bytes_.Clear();
    if (request_.chunks.empty() && request_.items.empty()) {
      return absl::InvalidArgumentError(
          "InsertStreamRequest has neither chunks nor items.");
    }
    for (std::shared_ptr<Chunk>& chunk : request_.chunks) {
      chunks_.try_emplace(chunk->key(), std::move(chunk));
    }
    if (request_.items.empty()) return absl::OkStatus();

    // Confirmations of the inserts made right away (on this thread) go out
    // together once every item of the request is in, not one response each.
    {
      MutexLock lock(&guard_->mu);
      holding_confirmations_ = true;
    }
    absl::Status status = InsertItems();
    MutexLock lock(&guard_->mu);
    holding_confirmations_ = false;
    MaybeWriteLocked();
    return status;
  }

  absl::Status InsertItems() {
    for (PrioritizedItem& item : request_.items) {
      auto table = service_->FindTable(item.table());
      if (!table.ok()) return table.status();
      TableItem table_item;
      for (uint64_t key : GetChunkKeys(item.flat_trajectory())) {
        auto it = chunks_.find(key);
        if (it == chunks_.end()) {
          return absl::InternalError(absl::StrCat(
              "Could not find sequence chunk ", key, " for item ", item.key(),
              ": it was not sent on this stream or not kept."));
        }
        table_item.chunks.push_back(it->second);
      }
      const uint64_t key = item.key();
      table_item.item = std::move(item);
      {
        MutexLock lock(&guard_->mu);
        ++pending_inserts_;
        // As dm-reverb: pause reading at 10% of the table (1..1000 items).
        max_pending_inserts_ = std::max<int64_t>(
            1, std::min<int64_t>((*table)->max_size() / 10, 1000));
      }
      (*table)->InsertOrAssignAsync(
          std::move(table_item), [guard = guard_, key](const absl::Status& s) {
            MutexLock lock(&guard->mu);
            if (guard->reactor != nullptr) guard->reactor->OnInserted(key, s);
          });
    }

    absl::flat_hash_set<uint64_t> keep(request_.keep_chunk_keys.begin(),
                                       request_.keep_chunk_keys.end());
    absl::erase_if(chunks_, [&keep](const auto& entry) {
      return !keep.contains(entry.first);
    });
    if (chunks_.size() != keep.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Kept less chunks than expected: ", keep.size(),
          " keep_chunk_keys but only ", chunks_.size(),
          " of them were sent on this stream."));
    }
    return absl::OkStatus();
  }

  void OnInserted(uint64_t key, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu) {
    --pending_inserts_;
    if (!status.ok()) {
      FinishOnce(ToGrpcStatus(status));
      return;
    }
    confirmed_keys_.push_back(key);
    MaybeWriteLocked();
    if (read_paused_ && !finishing() &&
        pending_inserts_ < max_pending_inserts_) {
      read_paused_ = false;
      StartRead(&request_bytes_);
    }
    MaybeFinishLocked();
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu) {
    if (holding_confirmations_ || write_in_flight() || finishing() ||
        confirmed_keys_.empty()) {
      return;
    }
    InsertStreamResponse response;
    response.mutable_keys()->Add(confirmed_keys_.begin(),
                                 confirmed_keys_.end());
    confirmed_keys_.clear();
    bool own_buffer;
    response_.Clear();
    grpc::SerializationTraits<InsertStreamResponse>::Serialize(
        response, &response_, &own_buffer);
    StartWriteOf(&response_);
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu) {
    if (reads_done_ && pending_inserts_ == 0 && confirmed_keys_.empty() &&
        !write_in_flight()) {
      FinishOnce(grpc::Status::OK);
    }
  }

  ReverbServiceImpl* const service_;
  grpc::ByteBuffer request_bytes_;
  DecodedInsertRequest request_;
  // Chunks this stream sent and still keeps. Used by OnReadDone only.
  absl::flat_hash_map<uint64_t, std::shared_ptr<Chunk>> chunks_;

  grpc::ByteBuffer response_ ABSL_GUARDED_BY(guard_->mu);
  std::vector<uint64_t> confirmed_keys_ ABSL_GUARDED_BY(guard_->mu);
  int64_t pending_inserts_ ABSL_GUARDED_BY(guard_->mu) = 0;
  int64_t max_pending_inserts_ ABSL_GUARDED_BY(guard_->mu) = 1;
  bool read_paused_ ABSL_GUARDED_BY(guard_->mu) = false;
  bool reads_done_ ABSL_GUARDED_BY(guard_->mu) = false;
  bool holding_confirmations_ ABSL_GUARDED_BY(guard_->mu) = false;
};

// --- SampleStream --------------------------------------------------------------

// Reads and writes raw bytes: requests are parsed here, responses encoded
// by AppendSample (sample_response.h).
class SampleReactor : public StreamReactor<SampleReactor, grpc::ByteBuffer,
                                           grpc::ByteBuffer> {
 public:
  explicit SampleReactor(ReverbServiceImpl* service) : service_(service) {
    Start(&request_bytes_);
  }

  // The client has gone: its request queued at the table must not take
  // items (a queue would lose them).
  void OnCancel() override {
    StreamReactor::OnCancel();
    MutexLock lock(&guard_->mu);
    if (table_ != nullptr) table_->CancelSample(cancellation_);
  }

  void OnReadDone(bool ok) override {
    MutexLock lock(&guard_->mu);
    if (!ok) {
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    const grpc::Status parsed =
        grpc::SerializationTraits<SampleStreamRequest>::Deserialize(
            &request_bytes_, &request_);
    if (!parsed.ok()) {
      FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "Malformed SampleStreamRequest."));
      return;
    }
    if (request_.num_samples() <= 0) {
      FinishOnce(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("`num_samples` must be > 0, got ",
                       request_.num_samples(), ".")));
      return;
    }
    auto table = service_->FindTable(request_.table());
    if (!table.ok()) {
      FinishOnce(ToGrpcStatus(table.status()));
      return;
    }
    table_ = *std::move(table);
    remaining_ = request_.num_samples();
    // Only a strictly positive timeout counts (as dm-reverb).
    timeout_ = request_.has_rate_limiter_timeout() &&
                       request_.rate_limiter_timeout().milliseconds() > 0
                   ? absl::Milliseconds(
                         request_.rate_limiter_timeout().milliseconds())
                   : absl::InfiniteDuration();
    RequestSamplesLocked();
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&guard_->mu);
    responses_.pop_front();
    if (!WriteDone(ok)) return;
    MaybeWriteLocked();
    RequestSamplesLocked();
    MaybeFinishLocked();
  }

 private:
  void RequestSamplesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu) {
    if (finishing() || table_request_in_flight_ || remaining_ <= 0 ||
        static_cast<int>(responses_.size()) >=
            ReverbServiceImpl::kMaxQueuedResponses) {
      return;
    }
    const int32_t batch = static_cast<int32_t>(
        std::min<int64_t>(next_batch_size_, remaining_));
    next_batch_size_ = std::min<int64_t>(2 * next_batch_size_, 1 << 20);
    table_request_in_flight_ = true;
    TaskExecutor* executor = service_->executor();
    table_->SampleAsync(
        batch, absl::Now() + timeout_,
        [guard = guard_, executor](
            absl::StatusOr<std::vector<SampledItem>> samples) {
          auto deliver = [guard](
                             absl::StatusOr<std::vector<SampledItem>> samples) {
            MutexLock lock(&guard->mu);
            if (guard->reactor != nullptr) {
              guard->reactor->OnSampled(std::move(samples));
            }
          };
          // Small batches are serialized right here, on the table worker;
          // large ones on the executor, so that the worker goes on
          // sampling. Errors too: the table reports some (closed) on the
          // calling thread, which holds the guard.
          if (samples.ok() && SampledBytes(*samples) <= kInlineSampleBytes) {
            deliver(std::move(samples));
            return;
          }
          executor->Schedule([deliver, samples = std::move(samples)]() mutable {
            deliver(std::move(samples));
          });
        },
        cancellation_);
  }

  void OnSampled(absl::StatusOr<std::vector<SampledItem>> samples)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu) {
    table_request_in_flight_ = false;
    if (!samples.ok()) {
      FinishOnce(ToGrpcStatus(samples.status()));
      return;
    }
    // Each batch starts a response of its own; the one at the front may be
    // in flight.
    int64_t last_bytes = ReverbServiceImpl::kMaxSampleResponseBytes;
    for (const SampledItem& sample : *samples) {
      AppendSample(sample, ReverbServiceImpl::kMaxSampleResponseBytes,
                   &responses_, &last_bytes);
    }
    remaining_ -= static_cast<int64_t>(samples->size());
    samples->clear();  // Chunks are released outside the table's worker.
    MaybeWriteLocked();
    if (remaining_ > 0) {
      RequestSamplesLocked();
    } else if (!reads_done_ && !finishing()) {
      StartRead(&request_bytes_);
    }
    MaybeFinishLocked();
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu) {
    if (write_in_flight() || finishing() || responses_.empty()) return;
    SampleResponseBytes& front = responses_.front();
    front.bytes = front.wire.Finish();
    StartWriteOf(&front.bytes);
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu) {
    if (reads_done_ && remaining_ == 0 && !table_request_in_flight_ &&
        responses_.empty() && !write_in_flight()) {
      FinishOnce(grpc::Status::OK);
    }
  }

  ReverbServiceImpl* const service_;
  grpc::ByteBuffer request_bytes_;
  SampleStreamRequest request_;

  std::shared_ptr<Table> table_ ABSL_GUARDED_BY(guard_->mu);
  const Table::SampleCancellation cancellation_ =
      std::make_shared<std::atomic<bool>>(false);
  absl::Duration timeout_ ABSL_GUARDED_BY(guard_->mu);
  // Samples of the current request not yet handed to responses.
  int64_t remaining_ ABSL_GUARDED_BY(guard_->mu) = 0;
  int64_t next_batch_size_ ABSL_GUARDED_BY(guard_->mu) =
      ReverbServiceImpl::kInitialSampleBatchSize;
  bool table_request_in_flight_ ABSL_GUARDED_BY(guard_->mu) = false;
  bool reads_done_ ABSL_GUARDED_BY(guard_->mu) = false;
  // Responses to write; the front one is in flight while a write is.
  std::deque<SampleResponseBytes> responses_ ABSL_GUARDED_BY(guard_->mu);
};

// --- InitializeConnection ---------------------------------------------------------

class InitializeConnectionReactor
    : public grpc::ServerBidiReactor<InitializeConnectionRequest,
                                     InitializeConnectionResponse> {
 public:
  InitializeConnectionReactor() { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    // Address 0: no table pointer is handed over; use the gRPC path.
    response_.set_address(0);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  InitializeConnectionRequest request_;
  InitializeConnectionResponse response_;
};

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReverbServiceImpl>> ReverbServiceImpl::Create(
    std::vector<std::shared_ptr<Table>> tables,
    std::shared_ptr<Checkpointer> checkpointer) {
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
      new ReverbServiceImpl(std::move(tables), std::move(checkpointer)));
}

ReverbServiceImpl::ReverbServiceImpl(std::vector<std::shared_ptr<Table>> tables,
                                     std::shared_ptr<Checkpointer> checkpointer)
    : tables_(std::move(tables)),
      checkpointer_(std::move(checkpointer)),
      executor_(kNumExecutorThreads, "reverb-respond"),
      checkpoint_executor_(1, "reverb-ckpt") {
  for (const auto& table : tables_) tables_by_name_[table->name()] = table;
  absl::BitGen gen;
  tables_state_id_.set_high(absl::Uniform<uint64_t>(gen));
  tables_state_id_.set_low(absl::Uniform<uint64_t>(gen));
}

void ReverbServiceImpl::Close() {
  for (const auto& table : tables_) table->Close();
}

absl::StatusOr<std::shared_ptr<Table>> ReverbServiceImpl::FindTable(
    const std::string& name) const {
  auto it = tables_by_name_.find(name);
  if (it == tables_by_name_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Priority table ", name, " was not found"));
  }
  return it->second;
}

grpc::ServerUnaryReactor* ReverbServiceImpl::Checkpoint(
    grpc::CallbackServerContext* context, const CheckpointRequest*,
    CheckpointResponse* response) {
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
ReverbServiceImpl::InsertStream(grpc::CallbackServerContext*) {
  return new InsertReactor(this);
}

grpc::ServerUnaryReactor* ReverbServiceImpl::MutatePriorities(
    grpc::CallbackServerContext* context, const MutatePrioritiesRequest* request,
    MutatePrioritiesResponse*) {
  auto table = FindTable(request->table());
  if (!table.ok()) return FinishUnary(context, table.status());
  std::vector<KeyWithPriority> updates(request->updates().begin(),
                                       request->updates().end());
  std::vector<uint64_t> deletes(request->delete_keys().begin(),
                                request->delete_keys().end());
  return FinishUnary(context, (*table)->MutateItems(updates, deletes));
}

grpc::ServerUnaryReactor* ReverbServiceImpl::Reset(
    grpc::CallbackServerContext* context, const ResetRequest* request,
    ResetResponse*) {
  auto table = FindTable(request->table());
  if (table.ok()) (*table)->Reset();
  return FinishUnary(context, table.status());
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
ReverbServiceImpl::SampleStream(grpc::CallbackServerContext*) {
  return new SampleReactor(this);
}

grpc::ServerUnaryReactor* ReverbServiceImpl::ServerInfo(
    grpc::CallbackServerContext* context, const ServerInfoRequest*,
    ServerInfoResponse* response) {
  *response->mutable_tables_state_id() = tables_state_id_;
  for (const auto& table : tables_) *response->add_table_info() = table->info();
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerBidiReactor<InitializeConnectionRequest,
                        InitializeConnectionResponse>*
ReverbServiceImpl::InitializeConnection(grpc::CallbackServerContext*) {
  return new InitializeConnectionReactor();
}

}  // namespace deepmind::reverb
