#include "cc/client/sharded_sample_stream.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "cc/core/errors.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {
namespace {

absl::Status Cancelled() {
  return absl::CancelledError("The sample stream was cancelled.");
}

// The end of a shard's stream that means the shard is gone (unreachable,
// stopping, or cancelled by its watcher).
bool IsShardGone(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsCancelled(status);
}

}  // namespace

ShardedSampleStream::ShardedSampleStream(std::shared_ptr<Shards> shards,
                                         std::string table)
    : shards_(std::move(shards)),
      table_(std::move(table)),
      streams_(shards_->size()),
      watches_(shards_->size(), -1),
      epochs_(shards_->size(), 0),
      live_(shards_->size(), nullptr) {}

ShardedSampleStream::~ShardedSampleStream() {
  for (int s = 0; s < shards_->size(); ++s) CloseShard(s);
}

bool ShardedSampleStream::cancelled() const {
  MutexLock lock(&mu_);
  return cancelled_;
}

void ShardedSampleStream::Cancel() {
  MutexLock lock(&mu_);
  cancelled_ = true;
  for (SampleStreamInterface* stream : live_) {
    if (stream != nullptr) stream->Cancel();
  }
}

absl::StatusOr<SampleStreamInterface*> ShardedSampleStream::OpenShard(
    int shard) {
  if (streams_[shard] != nullptr) return streams_[shard].get();
  epochs_[shard] = shards_->Epoch(shard);
  const std::shared_ptr<const Connection>& connection =
      shards_->connection(shard);
  REVERB_RETURN_IF_ERROR(connection->WaitForConnection(kShardConnectTimeout));
  std::unique_ptr<SampleStreamInterface> stream;
  if (auto local = connection->LocalTable(table_, kShardConnectTimeout)) {
    stream = std::make_unique<LocalSampleStream>(std::move(local));
  } else {
    stream = std::make_unique<SampleStream>(connection, table_);
  }
  {
    MutexLock lock(&mu_);
    if (cancelled_) return Cancelled();
    live_[shard] = stream.get();
  }
  streams_[shard] = std::move(stream);
  watches_[shard] = shards_->Watch(shard, [this, shard] {
    MutexLock lock(&mu_);
    if (live_[shard] != nullptr) live_[shard]->Cancel();
  });
  // A shard that went down before the watch began is never reported to it.
  if (!shards_->IsUp(shard)) {
    return absl::UnavailableError(absl::StrCat(
        "The shard at ", connection->server_address(), " is down."));
  }
  return streams_[shard].get();
}

void ShardedSampleStream::CloseShard(int shard) {
  if (streams_[shard] == nullptr) return;
  shards_->Unwatch(watches_[shard]);
  {
    MutexLock lock(&mu_);
    live_[shard] = nullptr;
  }
  streams_[shard].reset();
}

absl::Status ShardedSampleStream::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
  for (int s = 0; s < shards_->size(); ++s) CloseShard(s);
  return status_;
}

void ShardedSampleStream::Redraw(const Shards::Weights& weights, Draw* draw) {
  const ShardPicker::Pick pick = picker_.Next(weights);
  draw->shard = pick.shard;
  draw->share = pick.share;
  draw->table_size = weights.total_size;
  draw->requested = false;
}

absl::Status ShardedSampleStream::ShardFailed(int shard, absl::Status status) {
  if (!IsShardGone(status) || cancelled()) return Fail(std::move(status));
  CloseShard(shard);
  shards_->MarkDown(shard, epochs_[shard]);
  const Shards::Weights weights = shards_->GetWeights(table_);
  for (Draw& draw : draws_) {
    if (draw.shard == shard) Redraw(weights, &draw);
  }
  return absl::OkStatus();
}

absl::Status ShardedSampleStream::SendRequests() {
  struct Batch {
    int shard;
    absl::Duration timeout;
    // Its draws (draws_ is not resized while they are in use).
    std::vector<Draw*> draws;
  };
  while (true) {
    absl::InlinedVector<Batch, 4> batches;
    for (Draw& draw : draws_) {
      if (draw.shard < 0 || draw.requested) continue;
      auto it = std::find_if(batches.begin(), batches.end(), [&](auto& b) {
        return b.shard == draw.shard && b.timeout == draw.timeout;
      });
      if (it == batches.end()) {
        batches.push_back({draw.shard, draw.timeout, {}});
        it = batches.end() - 1;
      }
      it->draws.push_back(&draw);
    }
    bool redrawn = false;
    for (const Batch& batch : batches) {
      absl::StatusOr<SampleStreamInterface*> stream = OpenShard(batch.shard);
      absl::Status status =
          stream.ok()
              ? (*stream)->Request(static_cast<int64_t>(batch.draws.size()),
                                   batch.timeout)
              : stream.status();
      if (!status.ok()) {
        REVERB_RETURN_IF_ERROR(ShardFailed(batch.shard, std::move(status)));
        redrawn = true;
        break;
      }
      for (Draw* draw : batch.draws) draw->requested = true;
    }
    if (!redrawn) return absl::OkStatus();
  }
}

absl::Status ShardedSampleStream::DrawWhenServable() {
  while (true) {
    const Shards::Weights weights = shards_->GetWeights(table_);
    if (weights.total > 0) {
      for (Draw& draw : draws_) {
        if (draw.shard < 0) Redraw(weights, &draw);
      }
      return SendRequests();
    }
    if (!weights.found) {
      int up = 0;
      while (up < shards_->size() && !shards_->IsUp(up)) ++up;
      if (up == shards_->size()) {
        return Fail(absl::UnavailableError(
            absl::StrCat("No shard of table ", table_, " can be reached.")));
      }
      // Its server answers for the table it does not have.
      for (Draw& draw : draws_) {
        if (draw.shard >= 0) continue;
        draw.shard = up;
        draw.share = 1;
      }
      return SendRequests();
    }
    const absl::Time deadline = draws_.front().deadline;
    if (absl::Now() >= deadline) return Fail(RateLimiterTimeout());
    bool cancelled;
    {
      MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&cancelled_),
                            std::min(deadline, absl::Now() + kWeightPoll));
      cancelled = cancelled_;
    }
    if (cancelled) return Fail(Cancelled());
  }
}

absl::Status ShardedSampleStream::Request(int64_t n, absl::Duration timeout) {
  if (!status_.ok()) return status_;
  if (n < 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("`num_samples` must be > 0, got ", n, ".")));
  }
  if (cancelled()) return Fail(Cancelled());
  const Shards::Weights weights = shards_->GetWeights(table_);
  // As a SampleStream takes the timeout: none if zero or negative; a
  // positive one below the server's 1 ms resolution still bounds the wait.
  const absl::Time deadline = timeout > absl::ZeroDuration()
                                  ? absl::Now() + timeout
                                  : absl::InfiniteFuture();
  for (int64_t i = 0; i < n; ++i) {
    Draw& draw = draws_.emplace_back();
    draw.timeout = timeout;
    draw.deadline = deadline;
    Redraw(weights, &draw);
  }
  return SendRequests();
}

absl::StatusOr<PackedSample> ShardedSampleStream::ReadPacked(
    absl::FunctionRef<void(SampleInfo*)> edit_info) {
  if (!status_.ok()) return status_;
  if (draws_.empty()) {
    return absl::FailedPreconditionError("No sample has been requested.");
  }
  while (true) {
    const Draw& draw = draws_.front();
    if (draw.shard < 0) {
      REVERB_RETURN_IF_ERROR(DrawWhenServable());
      continue;
    }
    uint64_t key = 0;
    absl::StatusOr<PackedSample> packed =
        streams_[draw.shard]->ReadPacked([&](SampleInfo* info) {
          info->set_probability(draw.share * info->probability());
          info->set_table_size(draw.table_size);
          key = info->item().key();
          edit_info(info);
        });
    if (!packed.ok()) {
      REVERB_RETURN_IF_ERROR(ShardFailed(draw.shard, packed.status()));
      REVERB_RETURN_IF_ERROR(SendRequests());
      continue;
    }
    shards_->sampled_keys().Record(key, draw.shard);
    draws_.pop_front();
    return packed;
  }
}

absl::StatusOr<Sample> ShardedSampleStream::Read() {
  REVERB_ASSIGN_OR_RETURN(PackedSample packed, ReadPacked());
  absl::StatusOr<Sample> sample = UnpackSample(std::move(packed));
  if (!sample.ok()) return Fail(sample.status());
  return sample;
}

bool ShardedSampleStream::has_buffered_entries() const {
  if (draws_.empty() || draws_.front().shard < 0) return false;
  const SampleStreamInterface* stream = streams_[draws_.front().shard].get();
  return stream != nullptr && stream->has_buffered_entries();
}

absl::Status ShardedSampleStream::Close() {
  if (!status_.ok()) return status_;
  if (!draws_.empty()) {
    return Fail(absl::CancelledError("The sample stream was closed early."));
  }
  absl::Status status;
  for (int s = 0; s < shards_->size(); ++s) {
    if (streams_[s] == nullptr) continue;
    absl::Status closed = streams_[s]->Close();
    if (status.ok()) status = std::move(closed);
    CloseShard(s);
  }
  status_ = status;
  return status;
}

}  // namespace deepmind::reverb
