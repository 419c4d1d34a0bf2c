// Writer: dm-reverb's legacy writer (Client.writer / Client.insert).
//
// Steps (one tensor per column) are buffered; every `chunk_length` steps
// become one chunk holding all columns (tensor i of the chunk is column i,
// stacked along time, optionally delta-encoded, snappy-compressed). An item
// covers the last `num_timesteps` steps appended; it is sent once all its
// steps are in chunks (when the buffer fills, or on Flush/Close), together
// with the chunks the server has not seen. The writer keeps the chunks that
// later items may reference (those of the last `max_timesteps` steps) and
// asks the server to keep them too.
//
// Requests are written by a sender thread, so the caller never waits for
// the network; requests that queue up while it writes go out as one. At
// most `max_in_flight_items` items are unsent or unconfirmed at any time;
// creating one more waits, without timeout, so Append and CreateItem block
// while the table's rate limiter holds inserts back. The stream is opened
// with the first item if the channel is connected; otherwise the items wait
// (without waiting for the server) until Flush, or until
// `max_in_flight_items` of them are ready to go, which then waits for the
// connection. So a Flush with a timeout bounds CreateItem + Flush. The
// call, its
// confirmations and its final status are an InsertStream's
// (insert_stream.h).
//
// Over one server, a stream that cannot be opened within kConnectTimeout
// (connection.h, UNAVAILABLE) or that breaks becomes the writer's permanent
// error. Over several shards the writer streams to one at a time
// (writer_shard.h): when its stream breaks (noticed by the next call that
// sends or waits), or cannot be opened within 250 ms, it streams to another
// shard and sends its unconfirmed items again with their chunks; the error
// is permanent only after kConnectTimeout of reaching no shard. NewEpisode
// may move it to a less loaded shard.
//
// Not thread-safe: one caller thread at a time (two more threads write
// requests and read confirmations).
#ifndef REVERB_CC_CLIENT_LEGACY_WRITER_H_
#define REVERB_CC_CLIENT_LEGACY_WRITER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/client/connection.h"
#include "cc/client/insert_stream.h"
#include "cc/client/shards.h"
#include "cc/client/writer_shard.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "cc/tensor/tensor.h"

namespace deepmind::reverb {

struct WriterOptions {
  int chunk_length = 1;
  int max_timesteps = 1;
  bool delta_encoded = false;
  int max_in_flight_items = 25;
};

class REVERB_EXPORT Writer {
 public:
  // INVALID_ARGUMENT unless 1 <= chunk_length <= max_timesteps and
  // max_in_flight_items >= 1.
  static absl::StatusOr<std::unique_ptr<Writer>> Create(
      std::shared_ptr<const Connection> connection,
      const WriterOptions& options);
  // Over `shards` (one of them at a time).
  static absl::StatusOr<std::unique_ptr<Writer>> Create(
      std::shared_ptr<Shards> shards, const WriterOptions& options);

  // Cancels the stream without flushing; call Close() to keep pending items.
  ~Writer();

  // One step: a tensor per column (the same columns every step). A step
  // that completes a chunk whose steps differ in a column's shape or dtype
  // is dropped with INVALID_ARGUMENT (as dm-reverb); Flush then fails the
  // same way while such steps stay buffered.
  absl::Status Append(std::vector<Tensor> step);
  // As above, for a step the writer may not keep: copied if it has to wait
  // for later steps of its chunk; a step that makes a chunk on its own
  // (chunk_length 1, no delta encoding) is compressed straight from `step`.
  absl::Status AppendViews(absl::Span<const TensorView> step);

  // T steps at once: every tensor has leading dimension T.
  absl::Status AppendSequence(std::vector<Tensor> sequence);

  // An item over the last `num_timesteps` steps. INVALID_ARGUMENT if
  // num_timesteps < 1, > max_timesteps or > the steps appended, or if the
  // priority is NaN.
  // A held item (`hold`), and every item created after it, is not sent
  // until ReleaseHeldItems: how the Python writer creates items it cannot
  // check against the table's signature yet.
  absl::Status CreateItem(const std::string& table, int num_timesteps,
                          double priority, bool hold = false);

  // Ends the hold of the held items, in the order created: those whose
  // `keep` is true are sent as the others, the others dropped.
  // INVALID_ARGUMENT unless `keep` has one flag per held item.
  absl::Status ReleaseHeldItems(const std::vector<bool>& keep);

  // Client.insert: AppendViews(step), CreateItem(table, 1, priority) for
  // each of `items` and Flush(timeout), with their errors, except that the
  // items' requests are written by the calling thread, which waits for
  // their confirmations anyway, instead of being handed to the sender
  // thread: a round trip costs a thread wake-up less.
  absl::Status InsertStep(
      absl::Span<const TensorView> step,
      absl::Span<const std::pair<std::string, double>> items,
      absl::Duration timeout = absl::InfiniteDuration());

  // Whether the stream is open or the channel connects within `wait`:
  // whether an item would be sent without waiting for a connection.
  bool Connected(absl::Duration wait = absl::ZeroDuration());

  // Chunks the buffered steps if a pending item needs them, sends every
  // pending item and waits for all confirmations. DEADLINE_EXCEEDED ("Timeout
  // exceeded ...") on timeout, including one that passes before the channel
  // connects (the items then stay pending). FAILED_PRECONDITION while items
  // are held.
  absl::Status Flush(absl::Duration timeout = absl::InfiniteDuration());

  // dm-reverb's description: "Writer(chunk_length=.., max_timesteps=..,
  // delta_encoded=0|1, max_in_flight_items=.., episode_id=..,
  // index_within_episode=<steps in chunks>, closed=0|1)".
  std::string DebugString() const;

  // Starts a new episode: a new episode id, and later items may only span
  // steps appended from now on (with any number of columns). Every item
  // must have been sent (Flush first), else FAILED_PRECONDITION. Over
  // several shards, with every item confirmed, the next items may go to
  // another shard (WriterShard::Rebalance).
  absl::Status NewEpisode();

  // Flush, then end the stream. Later calls fail with FAILED_PRECONDITION.
  absl::Status Close(absl::Duration timeout = absl::InfiniteDuration());

 private:
  struct ChunkInfo {
    uint64_t key;
    int64_t first_step;
    int64_t last_step;  // Inclusive.
    std::shared_ptr<const ChunkData> data;
    bool sent = false;  // On the current stream.
  };
  struct PendingItem {
    std::string table;
    int64_t first_step;
    int num_steps;
    double priority;
    bool held;
  };

  struct ChunkInfoAndHeader {
    ChunkInfo info;
    ChunkData header;  // Its fields but its tensors and uncompressed size.
  };

  // An item sent and not yet confirmed; over several shards, what it takes
  // to send it again on a new stream (over one server, only `seq`).
  struct InFlightItem {
    int64_t seq;  // Order of sending.
    PrioritizedItem item;
    std::vector<std::shared_ptr<const ChunkData>> chunks;  // It references.
    SentTo sent_to;  // For WriterShard::Confirmed.
  };

  Writer(WriterShard shard, const WriterOptions& options);

  // The stream's error, or FAILED_PRECONDITION naming `method` (as
  // dm-reverb) once the writer is closed.
  absl::Status CheckOpen(absl::string_view method) const;
  // Chunks the buffered steps.
  absl::Status FinalizeChunk();
  // The next chunk, of `rows` steps: its record (no data yet) and its
  // fields but its tensors and uncompressed size.
  ChunkInfoAndHeader NextChunk(int64_t rows) const;
  // Adds the chunk of one step of one column, `cell`, built in a segment of
  // the server's shared-memory session (built_chunk.h); false if there is
  // none, or it is not a cell to build there (it is then added as others).
  bool BuildInSegment(const TensorView& cell);
  // Adds the chunk of the next `rows` steps: `compress` fills column c's
  // tensor and returns its uncompressed bytes.
  absl::Status AddChunk(int64_t rows, absl::FunctionRef<absl::StatusOr<int64_t>(
                                          int c, tensorflow::TensorProto*)>
                                          compress);
  // Sends the pending items whose steps are all in chunks, up to the first
  // held one. Without a stream, over one server and unless `flushing`, only
  // if the channel is connected or `max_in_flight_items` items are ready.
  absl::Status SendReadyItems(bool flushing = false);
  // Pending items that are not held and whose steps are all in chunks.
  int ReadyItems() const;
  absl::Status SendItem(const PendingItem& pending);
  // Drops chunks no future or pending item can reference.
  void PruneChunks();
  // Opens the stream once the channel is connected (UNAVAILABLE if not
  // within kConnectTimeout; over several shards, tries others meanwhile).
  absl::Status StartStream();
  // One attempt: opens the stream to shard_ and starts the sender.
  absl::Status OpenStream();
  // The stream has ended. Over one server its final status becomes the
  // writer's permanent error, returned. Over several shards the writer
  // streams to another and sends every unconfirmed item again; OK once it
  // has, else the permanent error.
  absl::Status StreamAgain();
  // Stops the sender (after its writes) and drops the stream.
  void DropStream();
  // The sender thread: writes the outbox until StopSender().
  void SendRequests();
  // Moves the outbox's first request, and those that join it, into
  // `request` and `chunks`; marks them being written.
  void TakeOutboxLocked(InsertStreamRequest* request,
                        std::vector<std::shared_ptr<const ChunkData>>* chunks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes what TakeOutboxLocked took; false if the call has ended (the
  // outbox is dropped: the reader learns why).
  bool WriteTaken(const InsertStreamRequest& request,
                  absl::Span<const std::shared_ptr<const ChunkData>> chunks,
                  InsertStream::Then then);
  // Ends the sender's hold on the outbox (InsertStep) and writes one
  // request of it from the calling thread.
  void WriteOutboxHere();
  // Lets the sender write what is queued, then joins it.
  void StopSender();

  WriterShard shard_;
  const WriterOptions options_;
  uint64_t episode_id_;

  int num_columns_ = -1;
  std::vector<std::vector<Tensor>> buffer_;  // Steps not yet in a chunk.
  int64_t num_steps_ = 0;                    // Steps appended.
  int64_t chunked_steps_ = 0;                // Steps in chunks.
  std::deque<ChunkInfo> chunks_;
  std::deque<PendingItem> pending_items_;
  absl::Status status_;  // Permanent error.
  bool closed_ = false;

  std::unique_ptr<InsertStream> stream_;
  std::unique_ptr<WriterShard::Watch> watch_;  // Of stream_'s shard.
  absl::Time stream_started_;
  int64_t next_seq_ = 0;
  std::thread sender_;

  // Requests queued for the sender are merged up to this size.
  static constexpr int64_t kMaxMergedRequestBytes = 4 << 20;
  struct Outgoing {
    InsertStreamRequest request;  // Items and keep_chunk_keys.
    std::vector<std::shared_ptr<const ChunkData>> chunks;  // Sent first.
    int64_t bytes;                                         // Of its chunks.
  };

  Mutex mu_;
  absl::flat_hash_map<uint64_t, InFlightItem> in_flight_ ABSL_GUARDED_BY(mu_);
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Outgoing> outbox_ ABSL_GUARDED_BY(mu_);
  bool stop_sending_ ABSL_GUARDED_BY(mu_) = false;
  // The sender leaves the outbox to the caller (InsertStep).
  bool hold_outbox_ ABSL_GUARDED_BY(mu_) = false;
  // A request taken from the outbox is being written.
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_LEGACY_WRITER_H_
