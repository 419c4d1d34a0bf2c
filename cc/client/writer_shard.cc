#include "cc/client/writer_shard.h"

#include <algorithm>
#include <utility>

#include "absl/algorithm/container.h"
#include "cc/wire/grpc_status.h"

namespace deepmind::reverb {
namespace {

constexpr absl::Duration kMinBackoff = absl::Milliseconds(1);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// A stream that lived this long resets the backoff and the failing window.
constexpr absl::Duration kHealthyStreamLifetime = absl::Seconds(2);

}  // namespace

WriterShard::WriterShard(std::shared_ptr<const Connection> connection)
    : connection_(std::move(connection)), backoff_(kMinBackoff) {}

WriterShard::WriterShard(std::shared_ptr<Shards> shards)
    : shards_(shards->size() > 1 ? shards : nullptr),
      connection_(shards->size() > 1 ? nullptr : shards->connection(0)),
      shard_(shards->size() > 1 ? shards->AcquireWriterShard() : -1),
      backoff_(kMinBackoff) {}

WriterShard::WriterShard(WriterShard&& other)
    : shards_(other.shards_),
      connection_(other.connection_),
      shard_(std::exchange(other.shard_, -1)),
      epoch_(other.epoch_),
      backoff_(other.backoff_),
      failing_since_(other.failing_since_) {}

WriterShard::~WriterShard() { Leave(); }

std::shared_ptr<const Connection> WriterShard::connection() {
  if (!sharded()) return connection_;
  if (shard_ < 0) shard_ = shards_->AcquireWriterShard();
  epoch_ = shards_->Epoch(shard_);
  return shards_->connection(shard_);
}

absl::StatusOr<absl::Duration> WriterShard::OnStreamFailed(
    const absl::Status& status, absl::Time started) {
  const absl::Time now = absl::Now();
  if (now - started >= kHealthyStreamLifetime) {
    backoff_ = kMinBackoff;
    failing_since_ = absl::InfiniteFuture();
  }
  if (failing_since_ == absl::InfiniteFuture()) failing_since_ = now;
  if (!IsTransientError(status) || now - failing_since_ > kConnectTimeout) {
    return status;
  }
  if (sharded() && shard_ >= 0) {
    const int failed = shard_;
    shards_->MarkDown(failed, epoch_);
    shards_->ReleaseWriterShard(failed);
    shard_ = shards_->AcquireWriterShard(/*avoid=*/failed);
    // Another shard is up: stream there at once.
    if (shards_->IsUp(shard_)) return absl::ZeroDuration();
  }
  const absl::Duration delay = backoff_;
  backoff_ = std::min(2 * backoff_, kMaxBackoff);
  return delay;
}

bool WriterShard::Rebalance() {
  if (!sharded() || shard_ < 0) return false;
  const int from = shard_;
  shard_ = shards_->RebalanceWriterShard(from);
  return shard_ != from;
}

std::unique_ptr<WriterShard::Watch> WriterShard::WatchShard(
    std::function<void()> cancel) {
  if (!sharded()) return nullptr;
  const int shard = index();
  auto watch = std::make_unique<Watch>(shards_, shards_->Watch(shard, cancel));
  // It may have gone down before the watch began.
  if (!shards_->IsUp(shard)) cancel();
  return watch;
}

void WriterShard::Confirmed(int shard, const std::string& table, uint64_t key,
                            const SentTo& sent_to) const {
  if (!sharded()) return;
  for (int other : sent_to) {
    if (other != shard) shards_->DeleteOnRejoin(other, table, {key});
  }
}

void WriterShard::Leave() {
  if (!sharded() || shard_ < 0) return;
  shards_->ReleaseWriterShard(shard_);
  shard_ = -1;
}

WriterShard::Watch::Watch(std::shared_ptr<Shards> shards, int64_t id)
    : shards_(std::move(shards)), id_(id) {}

WriterShard::Watch::~Watch() { shards_->Unwatch(id_); }

void AddSentTo(int shard, SentTo* sent_to) {
  if (absl::c_find(*sent_to, shard) == sent_to->end()) {
    sent_to->push_back(shard);
  }
}

}  // namespace deepmind::reverb
