// ShardedSampleStream: the samples of one table drawn from the union of
// several shards (shards.h). Over Uniform and Prioritized tables every item
// has the probability one server holding all of them would give it; Fifo,
// Lifo and heap tables take the shards that can serve in turn.
//
// Request(n) makes n draws with the table's current weights
// (Shards::GetWeights, read once per Request) and asks each shard drawn for
// its count on a SampleStream of its own, opened the first time it is
// drawn (a LocalSampleStream for a shard in this process). Read() returns the
// samples in the order of the draws: the k-th sample read is the k-th draw's,
// so the sequence is as i.i.d. as a single server's. Each sample's SampleInfo
// is rewritten (in place) so that
//   probability = weight[shard] / total * the shard's probability
//                 (round-robin tables: the shard's),
//   table_size  = the table's size summed over the shards that are up;
// and its key is recorded with its shard (Shards::sampled_keys()).
//
// Shards that go away. A shard whose stream ends with UNAVAILABLE or
// CANCELLED, or that Shards finds down (its watcher cancels the stream), is
// marked down (unless it has come back since the stream was opened: the
// failure is then of the server before); the draws that were its and are not
// read yet are drawn again among the others. Once it is up again and can serve,
// draws reach it again. When no shard is up, reads fail with UNAVAILABLE (a
// Sampler then reconnects, within its reconnect_window).
//
// No shard can serve (all weights 0: no shard has min_size_to_sample items,
// or every rate limiter blocks): the draw waits, re-reading the weights each
// kWeightPoll, until some shard can serve; after its request's
// rate_limiter_timeout Read() fails with the server's DEADLINE_EXCEEDED
// (RateLimiterTimeout(), cc/core/errors.h), and Cancel() ends the wait. If no
// shard that is up has the table at all, the draws go to the first shard
// that is up, whose server answers with its own error (NOT_FOUND).
//
// A draw waits for its shard as a request waits for a server's rate
// limiter: a shard that could serve at the last refresh but no longer can
// (a queue that other samplers emptied) holds up the draws after it until
// it serves or the rate_limiter_timeout passes. Other errors (that
// timeout, INVALID_ARGUMENT, NOT_FOUND) end the stream, as a single
// server's would.
//
// Not thread-safe, except Cancel(), which may be called from any thread.
#ifndef REVERB_CC_CLIENT_SHARDED_SAMPLE_STREAM_H_
#define REVERB_CC_CLIENT_SHARDED_SAMPLE_STREAM_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/local_sample_stream.h"
#include "cc/client/sample.h"
#include "cc/client/sample_stream.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/client/shard_picker.h"
#include "cc/client/shards.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

class REVERB_EXPORT ShardedSampleStream final : public SampleStreamInterface {
 public:
  // How often a draw that no shard can serve re-reads the weights.
  static constexpr absl::Duration kWeightPoll = absl::Milliseconds(15);
  // How long opening a shard's stream waits for its channel (the shard was
  // up at the last refresh, so it is normally connected already). A shard
  // not connected by then is marked down (Shards::MarkDown) and its draws
  // go to the others, without waiting for the refresher to find it down.
  static constexpr absl::Duration kShardConnectTimeout =
      absl::Milliseconds(250);

  ShardedSampleStream(std::shared_ptr<Shards> shards, std::string table);
  // Cancels the shards' streams unless Close() has ended them.
  ~ShardedSampleStream() override;

  ShardedSampleStream(const ShardedSampleStream&) = delete;
  ShardedSampleStream& operator=(const ShardedSampleStream&) = delete;

  absl::Status Request(int64_t n, absl::Duration rate_limiter_timeout) override;
  absl::StatusOr<Sample> Read() override;
  using SampleStreamInterface::ReadPacked;
  absl::StatusOr<PackedSample> ReadPacked(
      absl::FunctionRef<void(SampleInfo*)> edit_info) override;
  bool has_buffered_entries() const override;
  int64_t outstanding() const override {
    return static_cast<int64_t>(draws_.size());
  }
  bool ok() const override { return status_.ok(); }
  absl::Status Close() override;
  void Cancel() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One requested sample, not read yet.
  struct Draw {
    // -1: not drawn yet (no shard could serve it when it was drawn).
    int shard = -1;
    // Whether `shard`'s stream has been asked for it.
    bool requested = false;
    // ShardPicker::Pick::share and Weights::total_size at the draw.
    double share = 0;
    int64_t table_size = 0;
    // The request's rate limiter timeout, and when it runs out.
    absl::Duration timeout;
    absl::Time deadline;
  };

  // Draws `draw`'s shard with `weights`.
  void Redraw(const Shards::Weights& weights, Draw* draw);
  // Asks each shard's stream for the draws that are its and not requested
  // yet, drawing again those of shards that fail.
  absl::Status SendRequests();
  // Waits until some shard can serve the first draw (see the header), then
  // draws every draw not drawn yet and sends their requests.
  absl::Status DrawWhenServable();
  // `status` ended `shard`'s stream: if it means that the shard is gone,
  // marks it down and draws its draws again (OK); otherwise the stream's
  // end (the error).
  absl::Status ShardFailed(int shard, absl::Status status);

  // The stream of `shard`, opened (and watched) if needed: a
  // LocalSampleStream if the shard's server is in this process
  // (Connection::LocalTable), else a SampleStream.
  absl::StatusOr<SampleStreamInterface*> OpenShard(int shard)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets (unwatches, cancels) the stream of `shard`, if open.
  void CloseShard(int shard) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the stream with `status` (the first error wins) and closes the
  // shards' streams.
  absl::Status Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<Shards> shards_;
  const std::string table_;
  ShardPicker picker_;
  std::deque<Draw> draws_;
  // Each shard's stream (null until drawn, and once closed) and the id of
  // its Shards::Watch.
  std::vector<std::unique_ptr<SampleStreamInterface>> streams_;
  std::vector<int64_t> watches_;
  // The shard's Shards::Epoch when its stream was opened: its failure
  // reports the shard down only if the shard has not come back since.
  std::vector<int64_t> epochs_;
  absl::Status status_;

  // Never held while calling Shards: its watchers take it.
  mutable Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // streams_ as Cancel() and the watchers (other threads) see them.
  std::vector<SampleStreamInterface*> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SHARDED_SAMPLE_STREAM_H_
