// WriterShard: where a writer streams its items, one server or one shard at
// a time of several (shards.h), and what it does when a stream fails. Both
// writers (trajectory_writer.h, legacy_writer.h) hold one.
//
// One server (a Connection, or Shards of one): connection() is always it.
// After a stream failed with a transient error (IsTransientError,
// cc/wire/grpc_status.h) the writer streams to it again after a backoff
// (1 ms doubling to 1 s, reset by a stream that lived 2 s); after
// kConnectTimeout (connection.h) of failing continuously, or on any other
// error, the error is permanent. No calls beyond the writer's own stream.
//
// Several shards: the writer joins a shard (AcquireWriterShard) as it is
// made, so that writers made together spread evenly whenever each begins
// to stream (again in connection() after Leave()), and streams there until
// - that shard fails a stream with a transient error, or the refresher
//   finds it down (Watch cancels the stream then, since a frozen or cut-off
//   shard answers nothing): FailOver() marks it down (unless it has come
//   back since the stream began, Shards::Epoch) and moves the writer
//   to another shard at once while one is up, with the backoff above only
//   while none is; the error becomes permanent only after kConnectTimeout
//   of reaching no shard;
// - or, at an episode boundary with every item confirmed, Rebalance() finds
//   the shard overloaded (Shards::RebalanceWriterShard): the writer closes
//   its stream normally and opens the next one on the new shard.
// The writer then sends its unconfirmed items again on the new stream, with
// their chunks, and records for each item every shard it was sent to
// (SentTo); once a shard confirms it, Confirmed() hands its key to
// Shards::DeleteOnRejoin for the other ones, so that a shard that stored
// the item without confirming it deletes it when it answers again: no item
// is stored twice. (An item such a shard still holds queued behind its rate
// limiter is not stored there at all: the server withdraws the queued
// inserts of a stream that is cancelled, insert_reactor.h.)
//
// Not thread-safe: the thread of the writer that streams uses it; but
// sharded() and Confirmed() may be called from any thread, and Watch's
// callback runs on the thread that finds the shard down.
#ifndef REVERB_CC_CLIENT_WRITER_SHARD_H_
#define REVERB_CC_CLIENT_WRITER_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/connection.h"
#include "cc/client/shards.h"

namespace deepmind::reverb {

// The shards an item was sent to, in order (the last one is where it was
// sent last).
using SentTo = absl::InlinedVector<int, 2>;

class WriterShard {
 public:
  explicit WriterShard(std::shared_ptr<const Connection> connection);
  explicit WriterShard(std::shared_ptr<Shards> shards);

  // Leaves the shard.
  ~WriterShard();

  WriterShard(WriterShard&& other);
  WriterShard& operator=(WriterShard&&) = delete;

  // True over several shards.
  bool sharded() const { return shards_ != nullptr; }

  // The connection to stream to; over several shards, joins one first if
  // the writer has left its own.
  std::shared_ptr<const Connection> connection();
  // The shard of connection() (0 over one server).
  int index() const { return shard_ < 0 ? 0 : shard_; }

  // A stream to the current shard, opened at `started`, ended with
  // `status`: how long to wait before the next stream (whose connection()
  // may be another shard's), or the writer's permanent error.
  absl::StatusOr<absl::Duration> OnStreamFailed(const absl::Status& status,
                                                absl::Time started);

  // At an episode boundary, with nothing unconfirmed: true if the writer
  // moved to a less loaded shard (its next stream goes there). Always false
  // over one server.
  bool Rebalance();

  // Calls `cancel` (from another thread) when the current shard goes down,
  // at once if it already is, until the returned handle is destroyed (which
  // waits for a call in progress). A null handle over one server.
  class Watch;
  std::unique_ptr<Watch> WatchShard(std::function<void()> cancel);

  // Shard `shard` confirmed the item `key` of `table`, sent to `sent_to`:
  // the other shards there delete it when they answer again. Thread-safe.
  void Confirmed(int shard, const std::string& table, uint64_t key,
                 const SentTo& sent_to) const;

  // Leaves the current shard (the next connection() joins one again).
  void Leave();

 private:
  const std::shared_ptr<Shards> shards_;                // Null over one server.
  const std::shared_ptr<const Connection> connection_;  // Over one server.
  int shard_ = -1;  // Joined shard, -1 if none.
  // Shards::Epoch of shard_ when connection() was last asked for: a stream
  // that fails reports the shard down only if it has not come back since.
  int64_t epoch_ = 0;
  absl::Duration backoff_;
  absl::Time failing_since_ = absl::InfiniteFuture();
};

class WriterShard::Watch {
 public:
  Watch(std::shared_ptr<Shards> shards, int64_t id);
  ~Watch();

 private:
  const std::shared_ptr<Shards> shards_;
  const int64_t id_;
};

// Adds `shard` to `sent_to` unless it is there.
void AddSentTo(int shard, SentTo* sent_to);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_WRITER_SHARD_H_
