#include "cc/client/trajectory_writer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cc/client/built_chunk.h"
#include "cc/core/errors.h"
#include "cc/support/log.h"
#include "cc/support/mutex.h"
#include "cc/support/random_key.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"
#include "cc/tensor/signature.h"
#include "cc/wire/grpc_status.h"
#include "google/protobuf/arena.h"

namespace deepmind::reverb {
namespace {

// Every call after Close() returns CANCELLED with dm-reverb's message.
constexpr char kClosed[] = "TrajectoryWriter::Close has been called.";

// Locks the cells of `column` (TrajectoryWriter::ColumnRefs) and appends
// them to `cells`: INVALID_ARGUMENT (dm-reverb's messages) if one has
// expired, a squeezed column has other than one cell, or the cells differ in
// dtype or shape. Unlike dm-reverb (which crashes on it), an empty column is
// an error too.
template <typename Column>
absl::Status LockColumn(const Column& column,
                        std::vector<std::shared_ptr<CellRef>>* cells) {
  if (column.size == 0) {
    return absl::InvalidArgumentError("the column is empty.");
  }
  const size_t first = cells->size();
  for (size_t j = 0; j < column.size; ++j) {
    std::shared_ptr<CellRef> ref = column[j].lock();
    if (ref == nullptr) {
      return absl::InvalidArgumentError("Column contains expired CellRef.");
    }
    cells->push_back(std::move(ref));
  }
  if (column.squeeze && column.size != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TrajectoryColumn must contain exactly one row when squeeze is set "
        "but got ",
        column.size, "."));
  }
  const CellRef& head = *(*cells)[first];
  for (size_t i = 1; i < column.size; ++i) {
    const CellRef& cell = *(*cells)[first + i];
    if (cell.dtype() != head.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column references tensors with different dtypes: ",
          DataTypeName(head.dtype()),
          " (index 0) != ", DataTypeName(cell.dtype()), " (index ", i, ")."));
    }
    // The cells of one chunker share their shape.
    if (&cell.shape() != &head.shape() && cell.shape() != head.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column references tensors with incompatible shapes: [",
          absl::StrJoin(head.shape(), ","), "] (index 0) not compatible with [",
          absl::StrJoin(cell.shape(), ","), "] (index ", i, ")."));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrajectoryWriter>> TrajectoryWriter::Create(
    std::shared_ptr<const Connection> connection,
    std::shared_ptr<ChunkerOptions> options) {
  REVERB_RETURN_IF_ERROR(options->Validate());
  return std::unique_ptr<TrajectoryWriter>(new TrajectoryWriter(
      WriterShard(std::move(connection)), std::move(options)));
}

absl::StatusOr<std::unique_ptr<TrajectoryWriter>> TrajectoryWriter::Create(
    std::shared_ptr<Shards> shards, std::shared_ptr<ChunkerOptions> options) {
  REVERB_RETURN_IF_ERROR(options->Validate());
  return std::unique_ptr<TrajectoryWriter>(
      new TrajectoryWriter(WriterShard(std::move(shards)), std::move(options)));
}

TrajectoryWriter::TrajectoryWriter(WriterShard shard,
                                   std::shared_ptr<ChunkerOptions> options)
    : shard_(std::move(shard)),
      options_(std::move(options)),
      episode_id_(NewRandomKey()) {
  stream_thread_ = std::thread([this] { RunStreams(); });
  SetThreadName(stream_thread_, "reverb-writer");
}

TrajectoryWriter::~TrajectoryWriter() { Close(); }

void TrajectoryWriter::Close() {
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    if (stream_ != nullptr) stream_->Cancel();
  }
  stream_thread_.join();
}

std::shared_ptr<Chunker> TrajectoryWriter::GetChunkerLocked(int column) {
  while (static_cast<int>(chunkers_.size()) <= column) {
    const int index = static_cast<int>(chunkers_.size());
    auto configured = column_options_.find(index);
    chunkers_.push_back(std::make_shared<Chunker>(
        index, configured != column_options_.end() ? configured->second
                                                   : options_->Clone()));
  }
  return chunkers_[column];
}

absl::StatusOr<std::vector<std::optional<std::weak_ptr<CellRef>>>>
TrajectoryWriter::Append(absl::Span<const std::optional<TensorView>> step) {
  return AppendImpl(step, /*partial=*/false);
}

absl::StatusOr<std::vector<std::optional<std::weak_ptr<CellRef>>>>
TrajectoryWriter::AppendPartial(
    absl::Span<const std::optional<TensorView>> step) {
  return AppendImpl(step, /*partial=*/true);
}

absl::StatusOr<std::vector<std::optional<std::weak_ptr<CellRef>>>>
TrajectoryWriter::AppendImpl(absl::Span<const std::optional<TensorView>> step,
                             bool partial) {
  MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError(kClosed);
  REVERB_RETURN_IF_ERROR(status_);
  // Check every cell first, so that a bad one appends nothing.
  for (int i = 0; i < static_cast<int>(step.size()); ++i) {
    if (step[i].has_value()) {
      REVERB_RETURN_IF_ERROR(CheckElements(*step[i]));
      REVERB_RETURN_IF_ERROR(GetChunkerLocked(i)->CanAppend(
          step[i]->dtype, step[i]->shape, episode_id_, episode_step_));
    }
  }
  std::vector<std::optional<std::weak_ptr<CellRef>>> refs(step.size());
  for (int i = 0; i < static_cast<int>(step.size()); ++i) {
    if (!step[i].has_value()) continue;
    REVERB_ASSIGN_OR_RETURN(
        std::shared_ptr<CellRef> ref,
        chunkers_[i]->Append(*step[i], episode_id_, episode_step_,
                             segments_.get()));
    refs[i] = ref;
  }
  step_open_ = partial;
  if (!partial) ++episode_step_;
  return refs;
}

absl::StatusOr<std::vector<std::optional<std::vector<std::weak_ptr<CellRef>>>>>
TrajectoryWriter::AppendBatch(
    absl::Span<const std::optional<TensorView>> columns) {
  int64_t num_steps = -1;
  for (int i = 0; i < static_cast<int>(columns.size()); ++i) {
    if (!columns[i].has_value()) continue;
    const TensorView& column = *columns[i];
    if (column.shape.empty() ||
        (num_steps >= 0 && column.shape[0] != num_steps)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Every column of a batch needs the same leading dimension; column ",
          i, " is ", DescribeTensor(column), "."));
    }
    num_steps = column.shape[0];
  }
  MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError(kClosed);
  REVERB_RETURN_IF_ERROR(status_);
  if (step_open_) {
    return absl::FailedPreconditionError(
        "A batch cannot be appended while a partial step is open.");
  }
  // Check every column first, so that a bad one appends nothing.
  for (int i = 0; i < static_cast<int>(columns.size()); ++i) {
    if (columns[i].has_value() && num_steps > 0) {
      REVERB_RETURN_IF_ERROR(CheckElements(*columns[i]));
      REVERB_RETURN_IF_ERROR(GetChunkerLocked(i)->CanAppend(
          columns[i]->dtype, absl::MakeConstSpan(columns[i]->shape).subspan(1),
          episode_id_, episode_step_));
    }
  }
  std::vector<std::optional<std::vector<std::weak_ptr<CellRef>>>> refs(
      columns.size());
  for (int i = 0; i < static_cast<int>(columns.size()); ++i) {
    if (!columns[i].has_value()) continue;
    REVERB_ASSIGN_OR_RETURN(
        std::vector<std::shared_ptr<CellRef>> column_refs,
        chunkers_[i]->AppendRows(*columns[i], episode_id_, episode_step_,
                                 segments_.get()));
    refs[i].emplace(column_refs.begin(), column_refs.end());
  }
  episode_step_ += static_cast<int32_t>(std::max<int64_t>(0, num_steps));
  return refs;
}

absl::Status TrajectoryWriter::LockTrajectory(
    absl::Span<const ColumnRefs> trajectory, Item* item) const {
  size_t num_cells = 0;
  for (const ColumnRefs& column : trajectory) num_cells += column.size;
  absl::Status status =
      num_cells == 0
          ? absl::InvalidArgumentError("trajectory must not be empty.")
          : absl::OkStatus();
  item->cells.reserve(num_cells);
  for (int c = 0; status.ok() && c < static_cast<int>(trajectory.size()); ++c) {
    status = LockColumn(trajectory[c], &item->cells);
    if (!status.ok()) {
      status = absl::InvalidArgumentError(
          absl::StrCat("Error in column ", c, ": ", status.message()));
    }
    item->columns.push_back(
        {static_cast<int>(item->cells.size()), trajectory[c].squeeze});
  }
  if (!status.ok()) {
    // As dm-reverb, a closed or failed writer's error comes first (checked
    // here, off the path of good items: CreateItem checks before queuing).
    MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError(kClosed);
    REVERB_RETURN_IF_ERROR(status_);
  }
  return status;
}

absl::InlinedVector<TrajectoryWriter::ColumnRefs, 4> TrajectoryWriter::RefsOf(
    const std::vector<TrajectoryColumn>& trajectory) {
  absl::InlinedVector<ColumnRefs, 4> columns;
  columns.reserve(trajectory.size());
  for (const TrajectoryColumn& column : trajectory) {
    columns.push_back(
        {column.refs.data(), nullptr, 0, column.refs.size(), column.squeeze});
  }
  return columns;
}

absl::Status TrajectoryWriter::CheckTrajectory(
    const std::vector<TrajectoryColumn>& trajectory) const {
  Item item;
  REVERB_RETURN_IF_ERROR(LockTrajectory(RefsOf(trajectory), &item));
  MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError(kClosed);
  return status_;
}

absl::Status TrajectoryWriter::MakeItem(const std::string& table,
                                        double priority,
                                        absl::Span<const ColumnRefs> trajectory,
                                        Item* item) const {
  if (std::isnan(priority)) {
    return absl::InvalidArgumentError("`priority` must not be nan.");
  }
  REVERB_RETURN_IF_ERROR(LockTrajectory(trajectory, item));
  item->key = NewRandomKey();
  item->table = table;
  item->priority = priority;
  item->inserted_at = absl::Now();
  return absl::OkStatus();
}

absl::Status TrajectoryWriter::CreateItem(
    const std::string& table, double priority,
    const std::vector<TrajectoryColumn>& trajectory) {
  Item item;
  REVERB_RETURN_IF_ERROR(MakeItem(table, priority, RefsOf(trajectory), &item));
  std::string warning;
  {
    MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError(kClosed);
    REVERB_RETURN_IF_ERROR(status_);
    warning = QueueLocked(absl::MakeSpan(&item, 1));
  }
  if (!warning.empty()) Log(LogSeverity::kWarning, warning);
  return absl::OkStatus();
}

absl::Status TrajectoryWriter::CreateItems(
    const std::string& table, absl::Span<const double> priorities,
    const std::vector<BatchColumn>& columns) {
  const int num_items = static_cast<int>(priorities.size());
  absl::InlinedVector<ColumnRefs, 4> trajectory;
  trajectory.reserve(columns.size());
  for (int c = 0; c < static_cast<int>(columns.size()); ++c) {
    const BatchColumn& column = columns[c];
    for (int offset : column.offsets) {
      if (offset < 0 || static_cast<int64_t>(offset) + num_items >
                            static_cast<int64_t>(column.refs.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Offset ", offset, " of column ", c, " needs ", num_items,
            " refs from it, but the column has ", column.refs.size(), "."));
      }
    }
    trajectory.push_back({column.refs.data(), column.offsets.data(), 0,
                          column.offsets.size(), column.squeeze});
  }
  std::vector<Item> items(num_items);
  for (int i = 0; i < num_items; ++i) {
    for (ColumnRefs& column : trajectory) column.shift = i;
    REVERB_RETURN_IF_ERROR(
        MakeItem(table, priorities[i], trajectory, &items[i]));
  }
  std::string warning;
  {
    MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError(kClosed);
    REVERB_RETURN_IF_ERROR(status_);
    warning = QueueLocked(absl::MakeSpan(items));
  }
  if (!warning.empty()) Log(LogSeverity::kWarning, warning);
  return absl::OkStatus();
}

std::string TrajectoryWriter::QueueLocked(absl::Span<Item> items) {
  for (Item& item : items) {
    item.seq = next_seq_++;
    CountQueuedLocked(item, 1);
    queue_.push_back(std::move(item));
  }
  if (queue_.size() + in_flight_.size() < kPendingItemsWarningThreshold) {
    return "";
  }
  const absl::Time now = absl::Now();
  if (now < next_pending_warning_) return "";
  next_pending_warning_ = now + kPendingItemsWarningInterval;
  // dm-reverb's text.
  return absl::StrCat(
      "The number of pending items is alarmingly high, did you forget to "
      "call Flush? ",
      queue_.size(), " items are waiting to be sent and ", in_flight_.size(),
      " items have been sent to the server but haven't been confirmed yet. "
      "It is important to call Flush regularly as large numbers of pending "
      "items can result in OOM crashes on both client and server.");
}

void TrajectoryWriter::CountQueuedLocked(const Item& item, int delta) {
  uint64_t last = 0;
  for (size_t i = 0; i < item.cells.size(); ++i) {
    const uint64_t key = item.cells[i]->chunk_key();
    // Cells of one chunk lie next to each other.
    if (i > 0 && key == last) continue;
    last = key;
    if ((queued_chunk_refs_[key] += delta) == 0) queued_chunk_refs_.erase(key);
  }
}

absl::Span<const std::shared_ptr<CellRef>> TrajectoryWriter::Item::column_cells(
    int c) const {
  const int begin = c == 0 ? 0 : columns[c - 1].end;
  return absl::MakeConstSpan(cells).subspan(begin, columns[c].end - begin);
}

void TrajectoryWriter::Item::ToProto(PrioritizedItem* proto) const {
  proto->set_key(key);
  proto->set_table(table);
  proto->set_priority(priority);
  const int64_t nanos = absl::ToUnixNanos(inserted_at);
  auto* timestamp = proto->mutable_inserted_at();
  timestamp->set_seconds(nanos / 1000000000);
  timestamp->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  auto* trajectory = proto->mutable_flat_trajectory();
  for (int c = 0; c < static_cast<int>(columns.size()); ++c) {
    auto* column = trajectory->add_columns();
    column->set_squeeze(columns[c].squeeze);
    FlatTrajectory::ChunkSlice* last = nullptr;
    for (const auto& ref : column_cells(c)) {
      if (last != nullptr && last->chunk_key() == ref->chunk_key() &&
          last->offset() + last->length() == ref->offset()) {
        last->set_length(last->length() + 1);
        continue;
      }
      last = column->add_chunk_slices();
      last->set_chunk_key(ref->chunk_key());
      last->set_offset(ref->offset());
      last->set_length(1);
      last->set_index(0);
    }
  }
}

bool TrajectoryWriter::ItemReadyLocked(const Item& item) const {
  for (const auto& ref : item.cells) {
    if (!ref->IsReady()) return false;
  }
  return true;
}

absl::Status TrajectoryWriter::Flush(int ignore_last_num_items,
                                     absl::Duration timeout) {
  MutexLock lock(&mu_);
  return FlushLocked(ignore_last_num_items, timeout);
}

absl::Status TrajectoryWriter::FlushLocked(int ignore_last_num_items,
                                           absl::Duration timeout) {
  if (closed_) return absl::CancelledError(kClosed);
  REVERB_RETURN_IF_ERROR(status_);
  const int keep = std::max(0, ignore_last_num_items);
  const int to_finalize = static_cast<int>(queue_.size()) - keep;
  for (int i = 0; i < to_finalize; ++i) {
    for (const auto& ref : queue_[i].cells) {
      if (ref->IsReady()) continue;
      if (auto chunker = ref->GetChunker()) {
        REVERB_RETURN_IF_ERROR(chunker->Flush());
      }
    }
  }
  auto done = [this, keep]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !status_.ok() ||
           static_cast<int>(queue_.size() + in_flight_.size()) <= keep;
  };
  ++flushing_;
  const bool flushed = mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  --flushing_;
  if (!flushed) return WriterTimeout(queue_.size(), in_flight_.size());
  if (closed_) return absl::CancelledError(kClosed);
  return status_;
}

absl::Status TrajectoryWriter::EndEpisode(bool clear_buffers,
                                          absl::Duration timeout) {
  MutexLock lock(&mu_);
  REVERB_RETURN_IF_ERROR(FlushLocked(0, timeout));
  for (const auto& chunker : chunkers_) {
    if (clear_buffers) {
      chunker->Reset();
    } else {
      REVERB_RETURN_IF_ERROR(chunker->Flush());
    }
  }
  episode_id_ = NewRandomKey();
  episode_step_ = 0;
  step_open_ = false;
  if (shard_.sharded()) episode_ended_ = true;
  return absl::OkStatus();
}

absl::Status TrajectoryWriter::ConfigureChunker(
    int column, std::shared_ptr<ChunkerOptions> options) {
  REVERB_RETURN_IF_ERROR(options->Validate());
  MutexLock lock(&mu_);
  if (column < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Column index ", column, " must be >= 0."));
  }
  if (column < static_cast<int>(chunkers_.size())) {
    return chunkers_[column]->ApplyConfig(std::move(options));
  }
  column_options_[column] = std::move(options);
  return absl::OkStatus();
}

int TrajectoryWriter::max_num_keep_alive_refs() const {
  MutexLock lock(&mu_);
  int most = options_->GetNumKeepAliveRefs();
  for (const auto& [column, options] : column_options_) {
    most = std::max(most, options->GetNumKeepAliveRefs());
  }
  for (const auto& chunker : chunkers_) {
    most = std::max(most, chunker->options()->GetNumKeepAliveRefs());
  }
  return most;
}

int TrajectoryWriter::episode_steps() const {
  MutexLock lock(&mu_);
  return episode_step_;
}

int TrajectoryWriter::num_pending_items() const {
  MutexLock lock(&mu_);
  return static_cast<int>(queue_.size() + in_flight_.size());
}

int TrajectoryWriter::num_streamed_chunks() const {
  MutexLock lock(&mu_);
  return static_cast<int>(streamed_keys_.size());
}

// --- Streaming ---------------------------------------------------------------

void TrajectoryWriter::RunStreams() {
  while (true) {
    {
      MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&has_work));
      if (closed_) break;
      // An episode that ended while no stream was open.
      if (episode_ended_) RebalanceLocked();
    }
    const absl::Time started = absl::Now();
    const absl::Status status = RunStream();

    MutexLock lock(&mu_);
    if (closed_) break;
    if (status.ok()) {
      // Moved at an episode boundary: nothing is unconfirmed, and the new
      // stream has seen no chunks yet.
      streamed_keys_.clear();
      continue;
    }
    absl::StatusOr<absl::Duration> delay =
        shard_.OnStreamFailed(status, started);
    if (!delay.ok()) {
      status_ = delay.status();
      break;
    }
    // Send the unconfirmed items again, in their order, on a new stream
    // (which has seen no chunks yet).
    std::vector<Item> unconfirmed;
    for (auto& [key, item] : in_flight_) unconfirmed.push_back(std::move(item));
    in_flight_.clear();
    std::sort(unconfirmed.begin(), unconfirmed.end(),
              [](const Item& a, const Item& b) { return a.seq < b.seq; });
    for (auto it = unconfirmed.rbegin(); it != unconfirmed.rend(); ++it) {
      CountQueuedLocked(*it, 1);
      queue_.push_front(std::move(*it));
    }
    streamed_keys_.clear();
    if (*delay > absl::ZeroDuration()) {
      mu_.AwaitWithTimeout(absl::Condition(&closed_), *delay);
    }
  }
  shard_.Leave();
}

absl::Status TrajectoryWriter::RunStream() {
  {
    MutexLock lock(&mu_);
    stream_broken_ = false;
  }
  std::shared_ptr<const Connection> connection = shard_.connection();
  const int shard = shard_.index();
  REVERB_ASSIGN_OR_RETURN(std::unique_ptr<InsertStream> stream,
                          InsertStream::Open(
                              connection, absl::Milliseconds(250),
                              [this, shard](absl::Span<const uint64_t> keys) {
                                MutexLock lock(&mu_);
                                for (uint64_t key : keys) {
                                  auto it = in_flight_.find(key);
                                  if (it == in_flight_.end()) continue;
                                  shard_.Confirmed(shard, it->second.table, key,
                                                   it->second.sent_to);
                                  in_flight_.erase(it);
                                }
                              },
                              [this] {
                                MutexLock lock(&mu_);
                                stream_broken_ = true;
                              }));
  // Destroyed (unwatched) before the stream.
  std::unique_ptr<WriterShard::Watch> watch =
      shard_.WatchShard([raw = stream.get()] { raw->Cancel(); });
  {
    MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError(kClosed);
    stream_ = stream.get();
    segments_ = connection->KnownSharedMemory();
  }
  bool cancel = false;
  bool move = false;
  while (true) {
    // The request's items are many small messages: an arena makes them
    // one allocation.
    google::protobuf::Arena arena;
    auto* request =
        google::protobuf::Arena::CreateMessage<InsertStreamRequest>(&arena);
    std::vector<std::shared_ptr<const ChunkData>> chunks;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || stream_broken_ || episode_ended_ ||
               (!queue_.empty() && ItemReadyLocked(queue_.front()));
      };
      mu_.Await(absl::Condition(&ready));
      if (episode_ended_ && !closed_ && !stream_broken_) {
        if (RebalanceLocked()) {
          move = true;
          break;
        }
        continue;
      }
      // While items are in flight, let a few more join this request,
      // unless someone waits for them: one wake-up of this thread (and one
      // request, one response) per batch rather than per item. With none in
      // flight the stream is idle, and waiting would only delay them.
      auto batch_ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || stream_broken_ || flushing_ > 0 ||
               in_flight_.empty() || queue_.size() >= kBatchItems;
      };
      if (!batch_ready()) {
        mu_.AwaitWithTimeout(absl::Condition(&batch_ready), kBatchDelay);
      }
      cancel = closed_;
      if (closed_ || stream_broken_) break;
      BuildRequestLocked(shard, request, &chunks);
    }
    // A failed write means the call has ended: Finish() tells why.
    if (!stream->Write(*request, chunks,
                       InsertStream::Then::kMoreChunksFollow)) {
      break;
    }
  }
  if (cancel) stream->Cancel();
  absl::Status status;
  if (move) {
    // Everything sent was confirmed: nothing is lost, whatever the old
    // shard answers now.
    stream->Close().IgnoreError();
  } else {
    status = stream->Finish();
  }
  MutexLock lock(&mu_);
  stream_ = nullptr;
  return status;
}

bool TrajectoryWriter::RebalanceLocked() {
  episode_ended_ = false;
  // Items of the new episode already sent keep the writer where it is.
  return in_flight_.empty() && shard_.Rebalance();
}

bool TrajectoryWriter::BuildRequestLocked(
    int shard, InsertStreamRequest* request,
    std::vector<std::shared_ptr<const ChunkData>>* chunks) {
  int64_t bytes = 0;
  const size_t batch = queue_.size();
  for (size_t n = 0;
       n < batch && !queue_.empty() && ItemReadyLocked(queue_.front()) &&
       bytes < kMaxRequestSizeBytes;
       ++n) {
    Item item = std::move(queue_.front());
    queue_.pop_front();
    CountQueuedLocked(item, -1);
    for (const auto& ref : item.cells) {
      if (streamed_keys_.insert(ref->chunk_key()).second) {
        std::shared_ptr<const ChunkData> chunk = ref->GetChunk();
        bytes += static_cast<int64_t>(ChunkWireSize(chunk));
        chunks->push_back(std::move(chunk));
      }
    }
    // Item statistics for auto-tuned chunk lengths.
    for (int c = 0; c < static_cast<int>(item.columns.size()); ++c) {
      const auto cells = item.column_cells(c);
      if (auto chunker = cells.front()->GetChunker()) {
        chunker->options()->OnItemFinalized(cells);
      }
    }
    item.ToProto(request->add_items());
    AddSentTo(shard, &item.sent_to);
    const uint64_t key = item.key;
    in_flight_.emplace(key, std::move(item));
  }
  // Keep what later items may use: cells the chunkers keep alive and the
  // cells of queued items; forget the rest on both sides.
  absl::flat_hash_set<uint64_t> keep;
  for (const auto& chunker : chunkers_) {
    for (uint64_t key : chunker->GetKeepKeys()) {
      if (streamed_keys_.contains(key)) keep.insert(key);
    }
  }
  for (uint64_t key : streamed_keys_) {
    if (queued_chunk_refs_.contains(key)) keep.insert(key);
  }
  request->mutable_keep_chunk_keys()->Add(keep.begin(), keep.end());
  streamed_keys_ = std::move(keep);
  return request->items_size() > 0;
}

}  // namespace deepmind::reverb
