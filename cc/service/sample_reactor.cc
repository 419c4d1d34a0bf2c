#include "cc/service/sample_reactor.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cc/service/service.h"
#include "cc/support/mutex.h"
#include "cc/support/quiet_parse.h"
#include "cc/support/task_executor.h"
#include "cc/wire/grpc_status.h"

namespace deepmind::reverb {
namespace {

// Sample batches up to this many chunk bytes are serialized on the table
// worker (a thread hop costs more than copying them).
constexpr int64_t kInlineSampleBytes = 64 << 10;

// The largest table batch, whatever the server's max_samples_per_request.
constexpr int64_t kMaxSampleBatchSize = 1 << 20;

int64_t SampledBytes(const std::vector<SampledItem>& samples) {
  int64_t bytes = 0;
  for (const SampledItem& sample : samples) {
    for (const auto& chunk : sample.ref->chunks) {
      bytes += static_cast<int64_t>(chunk->DataByteSizeLong());
    }
  }
  return bytes;
}

// Moves `bytes` (a response) into a segment `lender` lends, if they are
// kMinResponseBytes or more and it has one to write, leaving the message
// that names it.
void LendResponse(SharedMemoryHost::Lender* lender, grpc::ByteBuffer* bytes) {
  const size_t size = bytes->Length();
  std::vector<grpc::Slice> slices;
  if (size < SharedMemoryHost::kMinResponseBytes ||
      !bytes->Dump(&slices).ok()) {
    return;
  }
  std::string name = lender->LendResponse(size, [&slices](char* out) {
    for (const grpc::Slice& slice : slices) {
      std::memcpy(out, slice.begin(), slice.size());
      out += slice.size();
    }
  });
  if (!name.empty()) *bytes = SharedResponseBytes(std::move(name), size);
}

}  // namespace

SampleReactor::SampleReactor(ReverbServiceImpl* service,
                             grpc::CallbackServerContext* context)
    : StreamReactor(service->open_streams(), service->finishing_streams()),
      service_(service),
      open_stream_(&service->metrics()->open_sample_streams),
      context_(context),
      stall_timeout_(service->limits().stalled_sample_stream_timeout),
      next_batch_size_(ReverbServiceImpl::kInitialSampleBatchSize) {
  Start(&request_bytes_);
}

// The stream's request queued at the table must not take items (a queue
// would lose them).
void SampleReactor::OnFailingLocked() {
  if (table_ != nullptr) table_->Cancel(cancellation_);
}

void SampleReactor::OnReadDone(bool ok) {
  MutexLock lock(&guard_->mu);
  if (!ok) {
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  grpc::Status parsed;
  {
    QuietProtobufLog quiet;
    parsed = grpc::SerializationTraits<SampleStreamRequest>::Deserialize(
        &request_bytes_, &request_);
  }
  if (!parsed.ok()) {
    FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "Malformed SampleStreamRequest."));
    return;
  }
  if (request_.num_samples() <= 0) {
    FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("`num_samples` must be > 0, got ",
                                         request_.num_samples(), ".")));
    return;
  }
  const int64_t max_samples = service_->limits().max_samples_per_request;
  if (request_.num_samples() > max_samples) {
    FinishOnce(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("`num_samples` must be <= ", max_samples,
                     " (the server's max_samples_per_request), got ",
                     request_.num_samples(), ".")));
    return;
  }
  auto table = service_->FindTable(request_.table());
  if (!table.ok()) {
    FinishOnce(ToGrpcStatus(table.status()));
    return;
  }
  table_ = *std::move(table);
  SharedMemoryHost* host = service_->shared_memory();
  if (lender_ == nullptr && host != nullptr &&
      host->SecretMatches(request_.shared_memory_secret())) {
    lender_ = std::make_unique<SharedMemoryHost::Lender>(host);
  }
  remaining_ = request_.num_samples();
  // Only a strictly positive timeout counts (as dm-reverb).
  timeout_ =
      request_.has_rate_limiter_timeout() &&
              request_.rate_limiter_timeout().milliseconds() > 0
          ? absl::Milliseconds(request_.rate_limiter_timeout().milliseconds())
          : absl::InfiniteDuration();
  RequestSamplesLocked();
}

void SampleReactor::OnWriteDone(bool ok) {
  MutexLock lock(&guard_->mu);
  responses_.pop_front();
  if (!WriteDone(ok)) return;
  MaybeWriteLocked();
  RequestSamplesLocked();
  MaybeFinishLocked();
}

void SampleReactor::RequestSamplesLocked() {
  int64_t queued = 0;
  for (const SampleResponseBytes& response : responses_) {
    queued += response.size;
  }
  const int64_t room = ReverbServiceImpl::kMaxQueuedSampleBytes - queued;
  if (finishing() || table_request_in_flight_ || remaining_ <= 0 ||
      static_cast<int>(responses_.size()) >=
          ReverbServiceImpl::kMaxQueuedResponses ||
      (lender_ == nullptr && room <= 0)) {
    return;
  }
  const int32_t batch =
      static_cast<int32_t>(std::min<int64_t>(next_batch_size_, remaining_));
  next_batch_size_ = std::min<int64_t>(
      {2 * next_batch_size_, service_->limits().max_samples_per_request,
       kMaxSampleBatchSize});
  table_request_in_flight_ = true;
  table_request_made_ = absl::Now();
  TaskExecutor* executor = service_->executor();
  table_->SampleAsync(
      batch, absl::Now() + timeout_,
      [guard = guard_,
       executor](absl::StatusOr<std::vector<SampledItem>> samples) {
        auto deliver =
            [guard](absl::StatusOr<std::vector<SampledItem>> samples) {
              MutexLock lock(&guard->mu);
              if (guard->reactor != nullptr) {
                guard->reactor->OnSampled(std::move(samples));
              }
            };
        // Small batches are serialized right here, on the table worker;
        // large ones on the executor, so that the worker goes on sampling.
        // Errors too: the table reports some (closed) on the calling
        // thread, which holds the guard.
        if (samples.ok() && SampledBytes(*samples) <= kInlineSampleBytes) {
          deliver(std::move(samples));
          return;
        }
        executor->Schedule([deliver, samples = std::move(samples)]() mutable {
          deliver(std::move(samples));
        });
      },
      cancellation_,
      lender_ != nullptr ? ReverbServiceImpl::kMaxLentSampleBatchBytes
                         : std::min(Table::kMaxSampleBatchBytes, room));
}

void SampleReactor::OnSampled(
    absl::StatusOr<std::vector<SampledItem>> samples) {
  table_request_in_flight_ = false;
  if (!samples.ok()) {
    FinishOnce(ToGrpcStatus(samples.status()));
    return;
  }
  service_->metrics()->sample_latency.Observe(absl::Now() -
                                              table_request_made_);
  // Each batch starts a response of its own; the one at the front may be in
  // flight.
  if (!samples->empty()) responses_.emplace_back();
  SharedMemoryHost::Lender* lender = lender_.get();
  AppendSamples(
      *samples, ReverbServiceImpl::kMaxSampleResponseBytes, &responses_,
      [lender](const Chunk& chunk) {
        return lender != nullptr ? lender->Lend(chunk) : std::string();
      },
      request_.trimmed_chunks());
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

void SampleReactor::MaybeWriteLocked() {
  if (write_in_flight() || finishing() || responses_.empty()) return;
  SampleResponseBytes& front = responses_.front();
  front.bytes = front.wire.Finish();
  if (lender_ != nullptr) LendResponse(lender_.get(), &front.bytes);
  StartWriteOf(&front.bytes);
  if (stall_timeout_ == absl::InfiniteDuration()) return;
  write_started_ = absl::Now();
  if (!stall_alarm_armed_) ArmStallAlarmLocked(write_started_ + stall_timeout_);
}

void SampleReactor::ArmStallAlarmLocked(absl::Time deadline) {
  stall_alarm_armed_ = true;
  stall_alarm_ = std::make_unique<grpc::Alarm>();  // The last one has fired.
  stall_alarm_->Set(absl::ToChronoTime(deadline), [guard = guard_](bool) {
    MutexLock lock(&guard->mu);
    if (guard->reactor != nullptr) guard->reactor->OnStallAlarm();
  });
}

void SampleReactor::OnStallAlarm() {
  stall_alarm_armed_ = false;
  if (finishing() || !write_in_flight()) return;
  const absl::Time deadline = write_started_ + stall_timeout_;
  if (absl::Now() < deadline) {  // A later write is in flight.
    ArmStallAlarmLocked(deadline);
    return;
  }
  FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED,
                          "The client took no sample response for the "
                          "server's stalled_sample_stream_timeout."));
  // The write in flight then fails (OnWriteDone); gRPC runs the reactions
  // on its own threads, not within TryCancel, so the mutex may be held.
  context_->TryCancel();
}

void SampleReactor::MaybeFinishLocked() {
  if (reads_done_ && remaining_ == 0 && !table_request_in_flight_ &&
      responses_.empty() && !write_in_flight()) {
    FinishOnce(grpc::Status::OK);
  }
}

}  // namespace deepmind::reverb
