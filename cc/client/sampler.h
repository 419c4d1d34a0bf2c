// Sampler: streams samples of one table from a server (or from several
// shards), in worker threads.
//
// Each worker keeps one stream open (a SampleStream to the server, or a
// ShardedSampleStream over the shards, see Create) with up to
// `max_in_flight_samples_per_worker` samples requested (more for small
// samples with `max_in_flight_bytes_per_worker`), after reserving room
// for them in the sampler's output queue (so memory stays bounded). It asks
// for more once half of them have arrived, so that the server has the next
// request before it has served the last (one request at a time would leave
// the stream idle for a round trip each time). Over n shards a Client's
// sampler (Client::NewSampler) has n times the window, shared by the
// worker's streams to the shards, so that each shard's requests are as
// large as one server's: the client's cost per sample follows the messages
// per sample (docs/benchmarks.md, "Sampling over shards"), and the queue
// holds up to n times as many samples (as n samplers of one server each
// would). Samples
// keep their place in the queue in the order they arrived while a small
// pool of threads unpacks (decompresses) the larger ones in parallel, so one
// stream is not limited by one core. Small samples are unpacked by the
// worker and queued together, up to kMaxQueuedTogether at a time, as long as
// their response holds more (a consumer waiting for samples then wakes once
// per group, not once per sample). Without `unpack_ahead`, every sample
// waits packed instead (the small ones still queued together), and
// GetNextStackedBatch decompresses them straight into their batch rows:
// the larger ones in parallel, the small ones in its own thread. A stream is
// replaced by a new one after `max_samples_per_stream` samples, so that
// round_robin channels spread streams over servers.
//
// UNAVAILABLE (the server cannot be reached, or stopped answering the
// channel's keepalive pings, connection.h) reconnects with a backoff from
// 1 ms to 1 s; a worker that has failed continuously for `reconnect_window`
// gives up and its error reaches the consumer. With a finite
// `rate_limiter_timeout` it gives up sooner: once that timeout has passed
// since it last asked for samples or received one, so that the wait and
// the reconnects together stay within the timeout. A finite
// `rate_limiter_timeout` also bounds the streams' reads on the client
// (sample_stream.h): a server that does not answer in time ends them with
// DEADLINE_EXCEEDED. Other errors, such as the
// table's rate-limiter timeout (DEADLINE_EXCEEDED) or CANCELLED from a
// server that stops, reach the consumer at once. Over shards the stream
// itself goes on without a shard that goes away; its UNAVAILABLE means
// that no shard can be reached.
//
// GetNextSample, GetNextBatch, error() and Close() may be called from any
// thread (they synchronize on the sampler's mutex).
#ifndef REVERB_CC_CLIENT_SAMPLER_H_
#define REVERB_CC_CLIENT_SAMPLER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/connection.h"
#include "cc/client/sample.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "cc/support/task_executor.h"

namespace deepmind::reverb {

struct SamplerOptions {
  // Samples to return in total; -1 means unlimited.
  int64_t max_samples = -1;
  int64_t max_in_flight_samples_per_worker = 100;
  // If > 0, a worker of small samples asks for more at once: as many as this
  // many bytes hold (by the average size of the samples received lately,
  // Sampler::kAverageHorizon: the uncompressed bytes of their chunks), from
  // max_in_flight_samples_per_worker up to kWindowGrowth times it, or up to
  // kMaxWindowGrowth times it while the consumer outruns the workers (see
  // Sampler's window growth). Each message and thread hand-over is then
  // shared by more samples; the queue is bounded by bytes instead of by
  // count.
  int64_t max_in_flight_bytes_per_worker = 0;
  int num_workers = 1;
  // -1 means unlimited.
  int64_t max_samples_per_stream = 10000;
  // Sent to the server; the table answers DEADLINE_EXCEEDED if it cannot
  // serve a request in time. Infinite (and, over gRPC, zero) means never.
  absl::Duration rate_limiter_timeout = absl::InfiniteDuration();
  absl::Duration reconnect_window = absl::Seconds(10);
  // False: samples wait in the queue as they arrived, and
  // GetNextStackedBatch decompresses them straight into the batch (those
  // worth unpacking in parallel, kMinBytesToHandOff, in parallel), skipping
  // a sample of its own and its copy into the batch; GetNextSample unpacks
  // them in the caller's thread. For a consumer of stacked batches
  // (ReplayIterator).
  bool unpack_ahead = true;
};

// Samples stacked: `columns`[c] holds column c of every sample, along a new
// leading dimension, in the order of `infos`.
struct REVERB_EXPORT StackedBatch {
  std::vector<std::shared_ptr<const SampleInfo>> infos;
  std::vector<Tensor> columns;
};

class REVERB_EXPORT Sampler {
 public:
  // Info values per sample: key, probability, table_size, priority,
  // times_sampled.
  static constexpr int kNumInfoTensors = 5;
  // Threads that unpack samples, per sampler, and the size from which a
  // sample is worth handing to them: the uncompressed bytes of its chunks,
  // which is what unpacking decompresses (smaller ones cost less to unpack
  // in the worker than to hand over).
  static constexpr int kUnpackThreads = 2;
  static constexpr int64_t kMinBytesToHandOff = 1024;
  // Small samples queued at once, at most.
  static constexpr int kMaxQueuedTogether = 64;
  // How far max_in_flight_bytes_per_worker may grow a worker's window: up
  // to kWindowGrowth times max_in_flight_samples_per_worker, and further,
  // up to kMaxWindowGrowth times, while the consumer outruns the workers.
  // A window of small samples bounds the stream's throughput (its samples
  // per round trip), so a consumer that waits for samples gets a larger
  // one: after each window's worth of samples received (the first one
  // aside, which a new sampler and an empty table take), the growth doubles
  // if the consumer found no sample queued meanwhile, and halves (to no
  // less than kWindowGrowth) if it found instead half of the queue's
  // capacity queued at some point: a consumer slower than the workers gets
  // back the smaller window, and samples drawn ahead of it wait no longer.
  static constexpr int64_t kWindowGrowth = 10;
  static constexpr int64_t kMaxWindowGrowth = 80;
  // The average sample size that sets the window weighs the last
  // kAverageHorizon samples fully and older ones less: their weight halves
  // about every kAverageHorizon samples.
  static constexpr int64_t kAverageHorizon = 128;

  // Opens the stream a worker reads next; an error counts as the stream's
  // (UNAVAILABLE: reconnect).
  using OpenStream =
      std::function<absl::StatusOr<std::unique_ptr<SampleStreamInterface>>()>;

  // INVALID_ARGUMENT for non-positive counts (other than -1 where allowed).
  // Over one server: SampleStreams to `table` there, or LocalSampleStreams
  // if the server is in this process (Connection::LocalTable).
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(
      std::shared_ptr<const Connection> connection, std::string table,
      const SamplerOptions& options);
  // Over the streams `open_stream` makes (Client::NewSampler: a
  // ShardedSampleStream over several shards).
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(
      OpenStream open_stream, const SamplerOptions& options);

  ~Sampler();

  // The next sample. OUT_OF_RANGE once max_samples have been returned;
  // DEADLINE_EXCEEDED if none arrives within `timeout`; CANCELLED after
  // Close() (samples still queued are dropped); otherwise the first error
  // of a worker (sticky). A sample that cannot be unpacked is returned as
  // its error (INVALID_ARGUMENT); every later call fails too, with error().
  absl::StatusOr<Sample> GetNextSample(
      absl::Duration timeout = absl::InfiniteDuration());

  // Up to `batch_size` samples: waits for the first one (until `timeout`),
  // then at most `fill_timeout` more for the batch to fill. Once a sample is
  // in hand, an error or a timeout returns the partial batch, and the error
  // comes with the next call. Errors as GetNextSample otherwise.
  absl::StatusOr<std::vector<Sample>> GetNextBatch(
      int batch_size, absl::Duration timeout = absl::InfiniteDuration(),
      absl::Duration fill_timeout = absl::InfiniteDuration());

  // GetNextBatch's samples, stacked. INVALID_ARGUMENT for a `batch_size`
  // below 1, or if the samples' columns differ in number, dtype or shape
  // (those samples are dropped; the next call goes on).
  absl::StatusOr<StackedBatch> GetNextStackedBatch(
      int batch_size, absl::Duration timeout = absl::InfiniteDuration(),
      absl::Duration fill_timeout = absl::InfiniteDuration());

  // The first error of a worker (OK while there is none): what every
  // later call returns once the samples before it are taken. A
  // DEADLINE_EXCEEDED of GetNextSample with error() OK is its own timeout.
  absl::Status error() const ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels the streams and joins the workers. Idempotent.
  void Close();

 private:
  Sampler(OpenStream open_stream, const SamplerOptions& options);

  void RunWorker(int index);
  // Serves one stream until it ends; adds the samples delivered to
  // `*delivered` and sets `*progress` to the time of its last request or
  // sample.
  absl::Status RunStream(int index, int64_t* delivered, absl::Time* progress);
  // Reserves queue room for up to `max` more samples of a stream that has
  // `stream_left` samples to go (-1: unlimited). Waits for room if `wait`;
  // 0 when there is nothing more to ask for (or, without `wait`, no room).
  int64_t Reserve(int64_t max, int64_t stream_left, bool wait)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Unreserve(int64_t n) ABSL_LOCKS_EXCLUDED(mu_);
  bool AllRequested() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Samples the queue holds at most: every worker's window.
  int64_t CapacityLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Counts `samples` received, of `bytes` in all, towards the average size
  // and the growth that set window_.
  void NoteReceivedLocked(int64_t samples, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OpenStream open_stream_;
  const SamplerOptions options_;

  mutable Mutex mu_;
  // Samples a worker keeps requested (see max_in_flight_bytes_per_worker).
  // Changed under mu_; workers read it for every sample without it.
  std::atomic<int64_t> window_;
  int64_t received_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t received_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The window's growth (kWindowGrowth to kMaxWindowGrowth), and what the
  // consumer found since it was last reconsidered: samples received since,
  // whether it waited for one (starved) and whether it found half of the
  // queue's capacity queued (backlogged). `warmed_up_` once the first
  // window's worth has been received.
  int64_t growth_ ABSL_GUARDED_BY(mu_) = kWindowGrowth;
  int64_t received_since_ ABSL_GUARDED_BY(mu_) = 0;
  bool starved_ ABSL_GUARDED_BY(mu_) = false;
  bool backlogged_ ABSL_GUARDED_BY(mu_) = false;
  bool warmed_up_ ABSL_GUARDED_BY(mu_) = false;
  // A sample's place in the queue, filled in once it is unpacked (or, if
  // `packed` is set, queued as it arrived: unpack_ahead false).
  struct Slot {
    absl::StatusOr<Sample> sample;
    std::optional<PackedSample> packed;
    bool ready = false;
  };
  // Takes the next sample once it is unpacked; false if the queue is empty
  // or its front is still being unpacked.
  bool PopReadyLocked(Slot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next slot, ready, as GetNextSample waits for it (until `deadline`,
  // which a batch's slots share: the clock is read only to wait): an OK
  // `sample` or a `packed` one; errors as GetNextSample's.
  absl::StatusOr<Slot> GetNextSlot(absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Up to `batch_size` slots, as GetNextBatch takes samples.
  absl::StatusOr<std::vector<Slot>> GetNextSlots(int batch_size,
                                                 absl::Duration timeout,
                                                 absl::Duration fill_timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A sample could not be unpacked: `status` is the sampler's error from
  // now on.
  void FailForGood(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void FailForGoodLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unpacks a slot queued packed into its `sample` (FailForGood if it
  // cannot be); whether the slot holds a sample.
  bool UnpackSlot(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);

  // Slots stay where they are while other slots are added and removed at
  // the ends (std::deque keeps references valid), so unpacking threads
  // fill them in through pointers.
  std::deque<Slot> queue_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t requested_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // A sample that could not be unpacked has been returned: from then on
  // every call returns error_, whatever is queued.
  bool unpack_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int workers_running_ ABSL_GUARDED_BY(mu_) = 0;
  // The stream of each worker, for Close() to cancel.
  std::vector<SampleStreamInterface*> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
  // Declared last: destroyed first, after it has run every queued unpack
  // (which uses mu_ and queue_).
  TaskExecutor unpacker_{kUnpackThreads, "reverb-unpack"};
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SAMPLER_H_
