#include "cc/client/local_sample_stream.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "cc/support/status_macros.h"

namespace deepmind::reverb {
namespace {

// A sampled item as a PackedSample: its SampleInfo (edited by `edit_info`),
// made on `arena`, and the chunks it references, shared with the table.
PackedSample PackSampledItem(const SampledItem& sampled,
                             absl::FunctionRef<void(SampleInfo*)> edit_info,
                             std::shared_ptr<google::protobuf::Arena> arena) {
  SampleInfo* info =
      google::protobuf::Arena::CreateMessage<SampleInfo>(arena.get());
  PrioritizedItem* item = info->mutable_item();
  *item = sampled.ref->item;
  item->set_priority(sampled.priority);
  item->set_times_sampled(sampled.times_sampled);
  info->set_probability(sampled.probability);
  info->set_table_size(sampled.table_size);
  info->set_rate_limited(sampled.rate_limited);
  edit_info(info);
  PackedSample packed;
  packed.info = std::shared_ptr<const SampleInfo>(std::move(arena), info);
  packed.chunks.reserve(sampled.ref->chunks.size());
  packed.owners.reserve(sampled.ref->chunks.size());
  for (const auto& chunk : sampled.ref->chunks) {
    std::shared_ptr<const ChunkData> data = chunk->SharedProto();
    packed.chunks.push_back(data.get());
    packed.owners.push_back(std::move(data));
  }
  return packed;
}

}  // namespace

LocalSampleStream::LocalSampleStream(std::shared_ptr<Table> table)
    : table_(std::move(table)) {}

absl::Status LocalSampleStream::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
  return status_;
}

absl::Status LocalSampleStream::Request(int64_t n, absl::Duration timeout) {
  if (!status_.ok()) return status_;
  if (closed_) return absl::FailedPreconditionError("The stream is closed.");
  // As the gRPC request: whole milliseconds, 0 meaning none.
  const int64_t ms = timeout == absl::InfiniteDuration()
                         ? 0
                         : absl::ToInt64Milliseconds(timeout);
  timeout_ = ms > 0 ? absl::Milliseconds(ms) : absl::InfiniteDuration();
  outstanding_ += n;
  return absl::OkStatus();
}

absl::Status LocalSampleStream::TakeBatch() {
  if (cancelled_) {
    return absl::CancelledError("The sample stream was cancelled.");
  }
  // As a call to a server that has gone: callers reopen on UNAVAILABLE.
  if (table_->closed()) {
    return absl::UnavailableError("The server has stopped.");
  }
  const int32_t batch =
      static_cast<int32_t>(std::min<int64_t>(next_batch_size_, outstanding_));
  next_batch_size_ = static_cast<int32_t>(
      std::min<int64_t>(2 * int64_t{next_batch_size_}, 1 << 20));
  auto delivery = std::make_shared<Delivery>();
  table_->SampleAsync(
      batch, absl::Now() + timeout_,
      [delivery](absl::StatusOr<std::vector<SampledItem>> samples) {
        MutexLock lock(&delivery->mu);
        delivery->result = std::move(samples);
        delivery->cv.Signal();
      },
      cancellation_,
      // The samples reference the chunks: no response bounds a batch.
      std::numeric_limits<int64_t>::max());
  // A Cancel() that came before the request was queued.
  if (cancelled_) table_->Cancel(cancellation_);
  absl::StatusOr<std::vector<SampledItem>> samples;
  {
    MutexLock lock(&delivery->mu);
    while (!delivery->result.has_value()) delivery->cv.Wait(&delivery->mu);
    samples = *std::move(delivery->result);
  }
  if (!samples.ok()) return samples.status();
  table_->CountLocalSamples(static_cast<int64_t>(samples->size()));
  for (SampledItem& sample : *samples) taken_.push_back(std::move(sample));
  return absl::OkStatus();
}

absl::StatusOr<PackedSample> LocalSampleStream::ReadPacked(
    absl::FunctionRef<void(SampleInfo*)> edit_info) {
  if (!status_.ok()) return status_;
  if (outstanding_ == 0) {
    return absl::FailedPreconditionError("No samples were requested.");
  }
  if (taken_.empty()) {
    if (absl::Status status = TakeBatch(); !status.ok()) return Fail(status);
  }
  if (arena_room_ == 0) {
    arena_ = std::make_shared<google::protobuf::Arena>();
    arena_room_ = kSamplesPerArena;
  }
  --arena_room_;
  PackedSample packed = PackSampledItem(taken_.front(), edit_info, arena_);
  taken_.pop_front();
  --outstanding_;
  return packed;
}

absl::StatusOr<Sample> LocalSampleStream::Read() {
  REVERB_ASSIGN_OR_RETURN(PackedSample packed, ReadPacked());
  auto sample = UnpackSample(std::move(packed));
  if (!sample.ok()) return Fail(sample.status());
  return sample;
}

absl::Status LocalSampleStream::Close() {
  closed_ = true;
  if (outstanding_ > 0 || !status_.ok()) {
    return Fail(absl::CancelledError("The sample stream was closed early."));
  }
  return absl::OkStatus();
}

void LocalSampleStream::Cancel() {
  cancelled_ = true;
  table_->Cancel(cancellation_);
}

}  // namespace deepmind::reverb
