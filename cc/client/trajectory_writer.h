// TrajectoryWriter: writes steps column by column and items that reference
// any cells of the recent steps (dm-reverb's TrajectoryWriter).
//
// Append() hands each present column of a step to that column's Chunker and
// returns a CellRef per cell. CreateItem() builds the item's FlatTrajectory
// from refs (consecutive cells of one chunk become one slice) and queues
// it; it never blocks. A background thread streams the queue: an item goes
// out once all its chunks are finalized, after the chunks the server has
// not seen on this stream; requests are batched up to 40 MB. Each request
// asks the server to keep the chunks later items may still use: those of
// the refs the chunkers keep alive and those of queued items.
//
// Each stream is an InsertStream (insert_stream.h), which reads the
// confirmations and gives the stream's final status. Confirmed items are
// forgotten. After UNAVAILABLE or CANCELLED the stream is reopened and
// unconfirmed items are sent again, with their chunks; after
// kConnectTimeout (connection.h, 10 s) of failing continuously, or on any
// other error, the error becomes the writer's permanent status, returned by
// every later call. Where the stream goes, and when, is its WriterShard's
// (writer_shard.h): over one server it is reopened there (backoff 1 ms to
// 1 s, reset by a stream that lived 2 s); over several shards the writer
// streams to one at a time, moves to another at once when it fails or goes
// down, and may move at EndEpisode to a less loaded one.
//
// Thread-safe.
#ifndef REVERB_CC_CLIENT_TRAJECTORY_WRITER_H_
#define REVERB_CC_CLIENT_TRAJECTORY_WRITER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/client/chunker.h"
#include "cc/client/connection.h"
#include "cc/client/insert_stream.h"
#include "cc/client/shards.h"
#include "cc/client/writer_shard.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

// Cells of one column of an item; a squeezed column has one cell and no
// time dimension.
struct TrajectoryColumn {
  std::vector<std::weak_ptr<CellRef>> refs;
  bool squeeze = false;
};

// One column of every item of a CreateItems batch: item i's column holds
// the cells refs[o + i] for each o in `offsets`, in order (a squeezed
// column has one offset).
struct BatchColumn {
  std::vector<std::weak_ptr<CellRef>> refs;
  std::vector<int> offsets;
  bool squeeze = false;
};

class REVERB_EXPORT TrajectoryWriter {
 public:
  // A request is written once it holds this many bytes.
  static constexpr int64_t kMaxRequestSizeBytes = 40 << 20;
  // While items are in flight (sent, unconfirmed), the stream thread waits
  // up to kBatchDelay for kBatchItems items to send together, unless a
  // Flush or EndEpisode is waiting; with none in flight it sends at once
  // (as Nagle's algorithm: the confirmations pace the requests, and an
  // idle stream adds no delay). Every request repeats the whole keep list
  // (with many refs kept alive, thousands of chunk keys, which both ends
  // turn into sets): the larger the batch, the less of that per item.
  static constexpr size_t kBatchItems = 128;
  static constexpr absl::Duration kBatchDelay = absl::Milliseconds(1);
  // While this many items or more are queued or unconfirmed, CreateItem and
  // CreateItems log dm-reverb's warning ("The number of pending items is
  // alarmingly high, did you forget to call Flush? ..."), at most once every
  // kPendingItemsWarningInterval (dm-reverb: every tenth item, which costs
  // a writer of small items that never flushes a third of its speed).
  static constexpr size_t kPendingItemsWarningThreshold = 50;
  static constexpr absl::Duration kPendingItemsWarningInterval =
      absl::Seconds(1);

  // `options` (validated, INVALID_ARGUMENT) are cloned for every column.
  static absl::StatusOr<std::unique_ptr<TrajectoryWriter>> Create(
      std::shared_ptr<const Connection> connection,
      std::shared_ptr<ChunkerOptions> options);
  // Over `shards` (one of them at a time).
  static absl::StatusOr<std::unique_ptr<TrajectoryWriter>> Create(
      std::shared_ptr<Shards> shards, std::shared_ptr<ChunkerOptions> options);

  // Close(): unsent items are dropped; Flush() first to keep them.
  ~TrajectoryWriter();

  // Appends a step: one optional tensor per column (column i is the i-th
  // leaf of the structure). Returns a ref for each present cell. The
  // tensors are viewed during the call only: cells are copied if they have
  // to wait for their chunk, or compressed where they are.
  // INVALID_ARGUMENT "... for column N" for a dtype or shape other than the
  // column's first.
  absl::StatusOr<std::vector<std::optional<std::weak_ptr<CellRef>>>> Append(
      absl::Span<const std::optional<TensorView>> step);

  // As Append, but the step stays open: a later Append or AppendPartial
  // adds other columns to the same step (a column given twice is an error).
  absl::StatusOr<std::vector<std::optional<std::weak_ptr<CellRef>>>>
  AppendPartial(absl::Span<const std::optional<TensorView>> step);

  // Appends T complete steps at once: one optional tensor per column, all
  // with leading dimension T (row t is step t). Returns the T refs of each
  // present column. FAILED_PRECONDITION while a partial step is open.
  absl::StatusOr<
      std::vector<std::optional<std::vector<std::weak_ptr<CellRef>>>>>
  AppendBatch(absl::Span<const std::optional<TensorView>> columns);

  // Queues an item. INVALID_ARGUMENT (dm-reverb's messages, "Error in column
  // N: ..." for a column) for a NaN priority, no cells at all, an empty
  // column, an expired ref, a squeezed column of other than one cell or a
  // column whose cells differ in dtype or shape; CANCELLED once closed.
  absl::Status CreateItem(const std::string& table, double priority,
                          const std::vector<TrajectoryColumn>& trajectory);

  // Queues one item per priority, all of them or (on error) none: item i,
  // of priority priorities[i], is made of `columns` as BatchColumn says.
  // The error is CreateItem's for the first item that has one (same code
  // and message); INVALID_ARGUMENT if an offset is negative or a column has
  // too few refs for the items ("... column N ...").
  absl::Status CreateItems(const std::string& table,
                           absl::Span<const double> priorities,
                           const std::vector<BatchColumn>& columns);

  // The error CreateItem would return for `trajectory` (all but the NaN
  // priority check), without queuing anything: callers that check items
  // against table signatures report these errors first, as dm-reverb does.
  absl::Status CheckTrajectory(
      const std::vector<TrajectoryColumn>& trajectory) const;

  // Finalizes the chunks of all but the last `ignore_last_num_items` queued
  // items and waits until at most that many items are unconfirmed.
  // DEADLINE_EXCEEDED ("Timeout exceeded ...") on timeout; the items stay
  // queued.
  absl::Status Flush(int ignore_last_num_items = 0,
                     absl::Duration timeout = absl::InfiniteDuration());

  // Flush(0, timeout), then, if `clear_buffers`, drops every buffered step
  // and kept ref (else finalizes the partial chunks), and starts a new
  // episode (new id, step 0). Over several shards the next items may go to
  // another shard (WriterShard::Rebalance).
  absl::Status EndEpisode(bool clear_buffers,
                          absl::Duration timeout = absl::InfiniteDuration());

  // Stops streaming; later calls return CANCELLED ("TrajectoryWriter::Close
  // has been called."). Idempotent.
  void Close();

  // New chunker options for column `column` (before its first append or
  // right after a chunk boundary).
  absl::Status ConfigureChunker(int column,
                                std::shared_ptr<ChunkerOptions> options);

  // The most refs any column keeps alive.
  int max_num_keep_alive_refs() const;
  // Complete steps appended in this episode.
  int episode_steps() const;

  // For tests: items queued or awaiting confirmation, and the number of
  // chunk keys the stream remembers having sent.
  int num_pending_items() const;
  int num_streamed_chunks() const;

 private:
  // A queued or unconfirmed item; its proto is written into the request
  // that sends it (again after a reconnect).
  struct Item {
    // Column c is cells [columns[c - 1].end, columns[c].end).
    struct Column {
      int end;
      bool squeeze;
    };
    // Order of creation, kept when unconfirmed items are sent again.
    int64_t seq;
    // The shards it was sent to, for WriterShard::Confirmed.
    SentTo sent_to;
    uint64_t key;
    std::string table;
    double priority;
    absl::Time inserted_at;
    // Every cell of the item, column after column (keeps the chunks alive).
    std::vector<std::shared_ptr<CellRef>> cells;
    absl::InlinedVector<Column, 4> columns;

    // The cells of column `c`.
    absl::Span<const std::shared_ptr<CellRef>> column_cells(int c) const;
    // The PrioritizedItem: consecutive cells of one chunk share a slice.
    void ToProto(PrioritizedItem* proto) const;
  };

  TrajectoryWriter(WriterShard shard, std::shared_ptr<ChunkerOptions> options);

  // The refs of one column of an item: refs[j], or refs[offsets[j] + shift]
  // if `offsets` is set (a column of a CreateItems batch).
  struct ColumnRefs {
    const std::weak_ptr<CellRef>* refs;
    const int* offsets;
    int shift;
    size_t size;
    bool squeeze;

    const std::weak_ptr<CellRef>& operator[](size_t j) const {
      return offsets == nullptr ? refs[j] : refs[offsets[j] + shift];
    }
  };

  // The ColumnRefs of a CreateItem (or CheckTrajectory) trajectory.
  static absl::InlinedVector<ColumnRefs, 4> RefsOf(
      const std::vector<TrajectoryColumn>& trajectory);

  // CheckTrajectory's checks; fills the cells and columns of `item`.
  absl::Status LockTrajectory(absl::Span<const ColumnRefs> trajectory,
                              Item* item) const ABSL_LOCKS_EXCLUDED(mu_);
  // CreateItem's checks and fields of an item (all but its seq).
  absl::Status MakeItem(const std::string& table, double priority,
                        absl::Span<const ColumnRefs> trajectory,
                        Item* item) const ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<std::vector<std::optional<std::weak_ptr<CellRef>>>> AppendImpl(
      absl::Span<const std::optional<TensorView>> step, bool partial);
  std::shared_ptr<Chunker> GetChunkerLocked(int column)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ItemReadyLocked(const Item& item) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FlushLocked(int ignore_last_num_items, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Background thread: (re)opens streams and writes queued items.
  void RunStreams();
  // Opens a stream (once connected, within 250 ms) and serves it until it
  // fails or the writer closes; returns why it ended, or OK once it has
  // closed it to move to another shard.
  absl::Status RunStream();
  // After EndEpisode over several shards: clears episode_ended_ and, if
  // nothing is unconfirmed, lets shard_ move (WriterShard::Rebalance); true
  // if it did.
  bool RebalanceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `items` (CreateItem, CreateItems); the pending-items warning to
  // log once the lock is released, or empty.
  std::string QueueLocked(absl::Span<Item> items)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `delta` (+1 as `item` joins queue_, -1 as it leaves) to the counts
  // of the chunks it refers to in queued_chunk_refs_.
  void CountQueuedLocked(const Item& item, int delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds the next request to `shard`: its items and keep_chunk_keys in
  // `request`, the chunks to send first in `chunks` (see
  // EncodeInsertRequest); false if there is nothing ready to send.
  bool BuildRequestLocked(int shard, InsertStreamRequest* request,
                          std::vector<std::shared_ptr<const ChunkData>>* chunks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Used by the stream thread only.
  WriterShard shard_;
  const std::shared_ptr<ChunkerOptions> options_;

  mutable Mutex mu_;
  std::vector<std::shared_ptr<Chunker>> chunkers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, std::shared_ptr<ChunkerOptions>> column_options_
      ABSL_GUARDED_BY(mu_);
  uint64_t episode_id_ ABSL_GUARDED_BY(mu_);
  int32_t episode_step_ ABSL_GUARDED_BY(mu_) = 0;
  bool step_open_ ABSL_GUARDED_BY(mu_) = false;

  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // When the next pending-items warning may be logged.
  absl::Time next_pending_warning_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  // For every chunk the items of queue_ refer to, how many refer to it: the
  // streamed chunks the server must keep for them, known without a look
  // at every queued item per request (a writer never flushed may queue
  // tens of thousands).
  absl::flat_hash_map<uint64_t, int> queued_chunk_refs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Item> in_flight_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> streamed_keys_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Flush and EndEpisode calls waiting for items to be confirmed.
  int flushing_ ABSL_GUARDED_BY(mu_) = 0;
  // Set by the stream's reader when the stream has ended.
  bool stream_broken_ ABSL_GUARDED_BY(mu_) = false;
  // Set by EndEpisode over several shards: the stream thread asks
  // WriterShard::Rebalance before it sends the next items.
  bool episode_ended_ ABSL_GUARDED_BY(mu_) = false;
  // The stream RunStream() serves, for Close() to cancel.
  InsertStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The shared-memory session of the server the latest stream went to
  // (null if none): chunks of one large incompressible step are built in
  // its segments (Chunker::Append).
  std::shared_ptr<const SharedMemoryClient> segments_ ABSL_GUARDED_BY(mu_);

  std::thread stream_thread_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_TRAJECTORY_WRITER_H_
