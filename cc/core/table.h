// Table: a named collection of items with a sampler, a remover, a maximum
// size and a rate limiter. The one place where items change.
//
// Requests are queued and served by one worker thread per table, in arrival
// order, whenever the rate limiter allows:
//  - an insert of a new key adds the item (its `inserted_at` set to the
//    current time), evicts (remover's pick) while the
//    table is larger than max_size (the new item itself may be evicted) and
//    counts one insert; an insert of an existing key only updates its
//    priority (the new item is dropped, the rate limiter is not consulted
//    twice);
//  - a sample request asks for up to `batch_size` items and is served, under
//    one lock acquisition, as far as the rate limiter allows. A request that
//    holds some items when nothing more can be done, or when its deadline
//    passes, is answered with the partial batch ("flexible batch"); one that
//    holds none at its deadline gets RateLimiterTimeout() (DEADLINE_EXCEEDED).
//    A batch is also closed once it references 1 MB of chunk data (a
//    response's worth; a request may set its own bound).
//    An item sampled max_times_sampled times (if > 0) is deleted.
// Inserts and samples interleave: one insert, then as many samples as
// allowed, and again.
//
// An insert that finds nothing queued before it and the rate limiter
// willing is done at once on the calling thread (saving a thread hop); its
// callback then runs there too, before InsertOrAssignAsync returns.
//
// A request rejected at once (an invalid item or batch size, a closed
// table) also gets its callback on the calling thread, before the call
// returns: a caller that holds a lock of its own across InsertOrAssignAsync
// or SampleAsync must not take that lock in the callback. Other callbacks
// run on the worker thread. All run outside the table's locks, exactly once
// per request. They must be quick, must not call the blocking
// methods of the same table and must not drop the last reference to it.
// Chunks of removed items are released outside the table lock.
//
// Bad input (invalid item, NaN priority, a priority the sampler rejects)
// fails only the request that carries it; the table keeps serving.
//
// Thread-safe. Close() (also run by the destructor) cancels all waiting and
// future requests with CANCELLED.
#ifndef REVERB_CC_CORE_TABLE_H_
#define REVERB_CC_CORE_TABLE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/core/chunk_census.h"
#include "cc/core/table_item.h"
#include "cc/core/table_stats.h"
#include "cc/rate_limiters/rate_limiter.h"
#include "cc/selectors/interface.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// Priority updates as the parallel arrays Table::MutateItems takes.
struct REVERB_EXPORT PriorityArrays {
  std::vector<uint64_t> keys;
  std::vector<double> priorities;

  // `updates`: KeyWithPriority's (a span, a repeated field).
  template <typename Updates>
  static PriorityArrays From(const Updates& updates) {
    PriorityArrays arrays;
    arrays.keys.reserve(updates.size());
    arrays.priorities.reserve(updates.size());
    for (const KeyWithPriority& update : updates) {
      arrays.keys.push_back(update.key());
      arrays.priorities.push_back(update.priority());
    }
    return arrays;
  }
};

class REVERB_EXPORT Table {
 public:
  // A sample batch is closed once its items reference this many chunk bytes
  // (unless its request sets another bound). Each batch costs a sample
  // stream a hand-over between server threads: at 1 MiB, 1 MiB samples came
  // one to a batch, at 15-20% more server CPU per sample over gRPC.
  static constexpr int64_t kMaxSampleBatchBytes = 4 << 20;

  using InsertCallback = std::function<void(const absl::Status&)>;
  using SampleCallback =
      std::function<void(absl::StatusOr<std::vector<SampledItem>>)>;

  // INVALID_ARGUMENT if `name` is empty, `max_size` < 1 or a selector is
  // missing. `max_times_sampled` < 1 means unlimited.
  static absl::StatusOr<std::shared_ptr<Table>> Create(
      std::string name, std::unique_ptr<ItemSelector> sampler,
      std::unique_ptr<ItemSelector> remover, int64_t max_size,
      int32_t max_times_sampled, RateLimiter rate_limiter,
      std::optional<tensorflow::StructuredValue> signature = std::nullopt);

  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  // Withdraws the queued requests made with it once set (see Cancel).
  using Cancellation = std::shared_ptr<std::atomic<bool>>;

  // Queues an insert. `done` gets OK once the item is in the table (or its
  // priority updated), or the error. Invalid items fail at once, on the
  // calling thread. With `cancellation`, Cancel withdraws it.
  void InsertOrAssignAsync(TableItem item, InsertCallback done,
                           Cancellation cancellation = nullptr);

  // Inserts and waits. On timeout returns RateLimiterTimeout(); the insert
  // stays queued and happens when the rate limiter allows.
  absl::Status InsertOrAssign(
      TableItem item, absl::Duration timeout = absl::InfiniteDuration());

  // Queues a sample request for up to `batch_size` (>= 1) items, closed
  // once they reference `max_bytes` of chunk data (at least one item is
  // taken). With `cancellation`, Cancel withdraws it. A caller that only
  // references the chunks (no response to serialize) may raise `max_bytes`.
  void SampleAsync(int32_t batch_size, absl::Time deadline, SampleCallback done,
                   Cancellation cancellation = nullptr,
                   int64_t max_bytes = kMaxSampleBatchBytes);

  // Sets `cancellation`: the requests made with it that are still queued end
  // CANCELLED, and none of them changes the table once this returns. A
  // sample request samples nothing more (a stream whose client has gone must
  // not take items, which a queue would then lose); an insert is not done
  // (a stream that ends unconfirmed must not store its items later, or a
  // writer that sends them again elsewhere stores them twice). A request
  // made later with it is withdrawn too.
  void Cancel(const Cancellation& cancellation) ABSL_LOCKS_EXCLUDED(queue_mu_);

  // Samples up to `batch_size` items and waits for them (flexible batch).
  absl::StatusOr<std::vector<SampledItem>> SampleFlexibleBatch(
      int32_t batch_size, absl::Duration timeout = absl::InfiniteDuration());

  // Samples one item.
  absl::StatusOr<SampledItem> Sample(
      absl::Duration timeout = absl::InfiniteDuration());

  // Deletes `deletes`, then sets the priority of `keys[i]` to
  // `priorities[i]`, in order, under one lock acquisition. Unknown keys are
  // ignored; each key is looked up once, and a selector that ignores
  // priorities (ItemSelector::uses_priorities) is not asked. An update the
  // selectors reject (NaN, or negative for Prioritized) is skipped; the
  // others are applied and the first error is returned. INVALID_ARGUMENT,
  // changing nothing, if the spans differ in length.
  absl::Status MutateItems(absl::Span<const uint64_t> keys,
                           absl::Span<const double> priorities,
                           absl::Span<const uint64_t> deletes);
  // The same with (key, priority) pairs.
  absl::Status MutateItems(absl::Span<const KeyWithPriority> updates,
                           absl::Span<const uint64_t> deletes);

  // Removes all items and zeroes the rate limiter and episode counters.
  // Queued requests stay queued.
  void Reset();

  // Stops the worker; waiting and later requests get CANCELLED. Idempotent.
  // Must not be called from a callback of this table.
  void Close();

  // The rate limiter's predicates (max_size and max_times_sampled are not
  // considered, as in dm-reverb).
  bool CanSample(int64_t num_samples) const;
  bool CanInsert(int64_t num_inserts) const;

  int64_t size() const;
  int64_t max_size() const;
  const std::string& name() const { return name_; }

  // The item with its current priority and times_sampled, or NOT_FOUND.
  absl::StatusOr<PrioritizedItem> Get(uint64_t key) const;

  TableInfo info() const;
  // Counts and chunk totals for metrics (table_stats.h), read under the
  // table's lock without walking its items.
  TableStats stats() const;

  // Counted in TableInfo's num_local_inserts and num_local_samples: the
  // items inserted and samples taken by clients in the server's process
  // that use the table directly (cc/core/local_table.h).
  void CountLocalInserts(int64_t n) { local_inserts_ += n; }
  void CountLocalSamples(int64_t n) { local_samples_ += n; }

  // True once Close() has begun.
  bool closed() const ABSL_LOCKS_EXCLUDED(queue_mu_);

  // True while a sample request waits in the table: queued, or held by the
  // worker until the rate limiter lets it through (and during the worker's
  // round that serves it).
  bool samples_waiting() const ABSL_LOCKS_EXCLUDED(queue_mu_);

  // A consistent copy of the table, taken under its lock: settings and
  // counters, the items in insertion order (with their current priority and
  // times_sampled) and the chunks they reference.
  struct CheckpointData {
    PriorityTableCheckpoint table;
    std::vector<PrioritizedItem> items;
    std::vector<std::shared_ptr<Chunk>> chunks;  // Each chunk once.
  };
  CheckpointData Checkpoint() const;

  // Replaces the contents with a checkpoint's: the items are inserted in the
  // given order (bypassing the rate limiter, keeping priority and
  // times_sampled), then the counters are restored. With
  // `use_checkpoint_options` the selectors, max_size, max_times_sampled,
  // rate limiter settings and signature come from the checkpoint (as
  // dm-reverb); otherwise the table keeps its own and items beyond its
  // max_size are evicted by its remover as they are inserted.
  // INVALID_ARGUMENT for an invalid item or options.
  absl::Status Restore(const PriorityTableCheckpoint& checkpoint,
                       std::vector<TableItem> items,
                       bool use_checkpoint_options);

  std::string DebugString() const;

 private:
  struct Entry {
    std::shared_ptr<const TableItem> item;
    double priority;
    int32_t times_sampled;
    // Serialized size of the item's chunks, counted against a sample batch.
    int64_t chunk_bytes;
    // Insertion order.
    uint64_t seq;
  };
  struct InsertRequest {
    TableItem item;
    InsertCallback done;
    Cancellation cancellation;
    // The rate limiter has held it back (counted in inserts_blocked_).
    bool blocked = false;
  };
  struct SampleRequest {
    int32_t batch_size;
    absl::Time deadline;
    SampleCallback done;
    Cancellation cancellation;
    int64_t max_bytes;
    std::vector<SampledItem> items;
    int64_t bytes = 0;
    bool rate_limited = false;
  };
  // Work prepared under the lock and finished outside it.
  struct Outbox {
    std::vector<std::function<void()>> callbacks;
    std::vector<std::shared_ptr<const TableItem>> garbage;
  };
  // What the worker spends its time on (TableInfo.table_worker_time).
  enum WorkerState {
    kRunning,  // Serving requests (includes the two below).
    kSampling,
    kInserting,
    kSleeping,           // Nothing queued.
    kWaitingForSamples,  // Inserts queued, blocked by the rate limiter.
    kWaitingForInserts,  // Samples queued, blocked by the rate limiter.
    kNumWorkerStates
  };

  Table(std::string name, std::unique_ptr<ItemSelector> sampler,
        std::unique_ptr<ItemSelector> remover, int64_t max_size,
        int32_t max_times_sampled, RateLimiter rate_limiter,
        std::optional<tensorflow::StructuredValue> signature);

  void WorkerLoop();
  // Serves queued requests while possible; true if anything was served.
  bool ServeRequests(Outbox* outbox) ABSL_LOCKS_EXCLUDED(mu_);
  // Answers requests that cannot progress: partial batches and expired ones.
  // Returns the earliest deadline among the requests left waiting.
  absl::Time AnswerStalledSamples(Outbox* outbox);
  void FinishSampleRequest(SampleRequest* request, absl::Status status,
                           Outbox* outbox);
  // Ends the cancelled requests of samples_ and, after a Cancel since the
  // last call, of inserts_ (CANCELLED). Worker only.
  void DropCancelled(Outbox* outbox) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Inserts `*request` at once if it is cancelled (its status CANCELLED in
  // `*status`) or the rate limiter allows (the insert's status); false (and
  // `*request` untouched) otherwise.
  bool TryInsertNow(InsertRequest* request, absl::Status* status,
                    Outbox* outbox) ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the requests handed over by other threads to the worker's queues.
  void TakeIncomingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);
  void CancelAll(Outbox* outbox) ABSL_LOCKS_EXCLUDED(queue_mu_);

  absl::Status InsertOrAssignLocked(TableItem item, Outbox* outbox)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a new item with its priority and times_sampled, evicting while the
  // table is over max_size. No rate limiter accounting.
  absl::Status AddItemLocked(TableItem item, int32_t times_sampled,
                             Outbox* outbox) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearLocked(Outbox* outbox) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the priority of `key` (present, with `entry`) in the selectors that
  // use priorities and in `entry`; on error changes nothing.
  absl::Status UpdatePriorityLocked(uint64_t key, Entry* entry, double priority)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills `request` as far as the rate limiter allows.
  void SampleBatchLocked(SampleRequest* request, Outbox* outbox)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SampleLocked(const ItemSelector::KeyWithProbability& pick,
                    SampleRequest* request, Outbox* outbox)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteLocked(uint64_t key, Outbox* outbox)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddWorkerTime(WorkerState state, absl::Duration duration)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the worker to re-evaluate the rate limiter.
  void Wake() ABSL_LOCKS_EXCLUDED(queue_mu_);

  const std::string name_;

  // Table state. Lock order: queue_mu_ is never acquired while holding mu_.
  mutable Mutex mu_;
  int64_t max_size_ ABSL_GUARDED_BY(mu_);
  int32_t max_times_sampled_ ABSL_GUARDED_BY(mu_);
  std::optional<tensorflow::StructuredValue> signature_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<ItemSelector> sampler_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ItemSelector> remover_ ABSL_GUARDED_BY(mu_);
  RateLimiter rate_limiter_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Episode id -> number of chunk references from items.
  absl::flat_hash_map<uint64_t, int64_t> episode_refs_ ABSL_GUARDED_BY(mu_);
  int64_t num_deleted_episodes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t num_unique_samples_ ABSL_GUARDED_BY(mu_) = 0;
  ChunkCensus chunk_census_ ABSL_GUARDED_BY(mu_);
  std::array<absl::Duration, kNumWorkerStates> worker_time_
      ABSL_GUARDED_BY(mu_);
  // Calls of Cancel, and their number when the worker last dropped
  // cancelled inserts.
  int64_t cancels_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cancels_dropped_ ABSL_GUARDED_BY(mu_) = 0;

  // Requests handed to the worker.
  mutable Mutex queue_mu_;
  CondVar queue_cv_;
  std::deque<InsertRequest> incoming_inserts_ ABSL_GUARDED_BY(queue_mu_);
  std::deque<SampleRequest> incoming_samples_ ABSL_GUARDED_BY(queue_mu_);
  bool wake_ ABSL_GUARDED_BY(queue_mu_) = false;
  // Whether the worker holds sample requests this round (set when it takes
  // the incoming ones; only new requests, which wake it anyway, add more).
  // Inserts made on the caller's thread wake the worker only then: with no
  // sampler waiting, an insert costs no thread switch.
  bool samples_waiting_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool closed_ ABSL_GUARDED_BY(queue_mu_) = false;

  // Owned by the worker thread; worker_inserts_ is its size, for callers
  // to see (under queue_mu_) whether inserts wait before theirs.
  std::deque<InsertRequest> inserts_;
  std::atomic<int64_t> worker_inserts_{0};
  std::deque<SampleRequest> samples_;

  std::atomic<int64_t> local_inserts_{0};
  std::atomic<int64_t> local_samples_{0};
  // Requests the rate limiter held back (TableStats), counted by the worker
  // (and by an insert tried on the caller's thread).
  std::atomic<int64_t> inserts_blocked_{0};
  std::atomic<int64_t> samples_blocked_{0};

  Mutex close_mu_;
  std::thread worker_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_TABLE_H_
