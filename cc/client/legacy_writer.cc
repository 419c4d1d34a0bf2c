#include "cc/client/legacy_writer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cc/client/arena_chunk.h"
#include "cc/client/built_chunk.h"
#include "cc/core/errors.h"
#include "cc/support/mutex.h"
#include "cc/support/random_key.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"
#include "cc/tensor/compression.h"
#include "cc/tensor/signature.h"
#include "google/protobuf/util/time_util.h"

namespace deepmind::reverb {
namespace {

// dm-reverb's checks (and texts) before the steps of a chunk are stacked:
// column by column, every step must have the first one's shape, then its
// dtype.
absl::Status CheckStackable(const std::vector<std::vector<Tensor>>& steps) {
  for (size_t c = 0; c < steps[0].size(); ++c) {
    const Tensor& first = steps[0][c];
    for (size_t s = 1; s < steps.size(); ++s) {
      if (steps[s][c].shape != first.shape) {
        return absl::InvalidArgumentError(
            absl::StrCat("Unable to concatenate tensors at index ", c,
                         " due to mismatched shapes.  Tensor 0 has shape: ",
                         ShapeString(first.shape), ", but tensor ", s,
                         " has shape: ", ShapeString(steps[s][c].shape)));
      }
    }
    for (size_t s = 1; s < steps.size(); ++s) {
      if (steps[s][c].dtype != first.dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Cannot concatenate tensors that have different data types. Got ",
            DataTypeName(first.dtype), " and ", DataTypeName(steps[s][c].dtype),
            "."));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const WriterOptions& options) {
  if (options.max_timesteps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_timesteps (", options.max_timesteps, ") must be >= 1."));
  }
  if (options.chunk_length < 1 ||
      options.chunk_length > options.max_timesteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_length (", options.chunk_length,
                     ") must be in [1, ", options.max_timesteps, "]."));
  }
  if (options.max_in_flight_items < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_in_flight_items (",
                                                   options.max_in_flight_items,
                                                   ") must be >= 1."));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Writer>> Writer::Create(
    std::shared_ptr<const Connection> connection,
    const WriterOptions& options) {
  REVERB_RETURN_IF_ERROR(ValidateOptions(options));
  return std::unique_ptr<Writer>(
      new Writer(WriterShard(std::move(connection)), options));
}

absl::StatusOr<std::unique_ptr<Writer>> Writer::Create(
    std::shared_ptr<Shards> shards, const WriterOptions& options) {
  REVERB_RETURN_IF_ERROR(ValidateOptions(options));
  return std::unique_ptr<Writer>(
      new Writer(WriterShard(std::move(shards)), options));
}

Writer::Writer(WriterShard shard, const WriterOptions& options)
    : shard_(std::move(shard)),
      options_(options),
      episode_id_(NewRandomKey()) {}

Writer::~Writer() {
  if (stream_ == nullptr) return;  // Never opened, or closed.
  stream_->Cancel();
  DropStream();
}

absl::Status Writer::CheckOpen(absl::string_view method) const {
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Calling method ", method, " after Close has been called"));
  }
  return status_;
}

absl::Status Writer::Append(std::vector<Tensor> step) {
  REVERB_RETURN_IF_ERROR(CheckOpen("Append"));
  if (num_columns_ < 0) num_columns_ = static_cast<int>(step.size());
  if (static_cast<int>(step.size()) != num_columns_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Number of tensors per timestep was inconsistent. "
                     "Previously it was ",
                     num_columns_, ", but is now ", step.size(), "."));
  }
  buffer_.push_back(std::move(step));
  ++num_steps_;
  if (static_cast<int>(buffer_.size()) == options_.chunk_length) {
    if (absl::Status status = FinalizeChunk(); !status.ok()) {
      // As dm-reverb: the step that could not join the chunk is dropped.
      buffer_.pop_back();
      --num_steps_;
      return status;
    }
  }
  return SendReadyItems();
}

absl::Status Writer::AppendViews(absl::Span<const TensorView> step) {
  const bool own_chunk =
      options_.chunk_length == 1 && !options_.delta_encoded &&
      buffer_.empty() &&
      (num_columns_ < 0 || static_cast<int>(step.size()) == num_columns_) &&
      std::none_of(step.begin(), step.end(),
                   [](const TensorView& cell) { return cell.IsString(); });
  if (!own_chunk) {
    // Buffered, or refused by the other Append with its checks and texts.
    std::vector<Tensor> copy;
    copy.reserve(step.size());
    for (const TensorView& cell : step) copy.push_back(CopyTensor(cell));
    return Append(std::move(copy));
  }
  REVERB_RETURN_IF_ERROR(CheckOpen("Append"));
  if (num_columns_ < 0) num_columns_ = static_cast<int>(step.size());
  ++num_steps_;
  if (step.size() == 1 && BuildInSegment(step[0])) return SendReadyItems();
  absl::Status status = AddChunk(
      1, [&](int c, tensorflow::TensorProto* proto) -> absl::StatusOr<int64_t> {
        TensorView row = step[c];
        row.shape.insert(row.shape.begin(), 1);
        REVERB_RETURN_IF_ERROR(CompressTensorAsProto(row, proto));
        return static_cast<int64_t>(row.bytes.size());
      });
  if (!status.ok()) {
    --num_steps_;
    return status;
  }
  return SendReadyItems();
}

absl::Status Writer::AppendSequence(std::vector<Tensor> sequence) {
  REVERB_RETURN_IF_ERROR(CheckOpen("AppendSequence"));
  // dm-reverb's checks and texts.
  if (sequence.empty()) {
    return absl::InvalidArgumentError("AppendSequence called with empty data.");
  }
  for (size_t i = 0; i < sequence.size(); ++i) {
    if (sequence[i].shape.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AppendSequence called with scalar tensor at index ", i, "."));
    }
    if (sequence[i].shape[0] != sequence[0].shape[0]) {
      std::vector<SignatureSpec> specs;
      for (const Tensor& column : sequence) {
        specs.push_back({"", column.dtype, column.shape});
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "AppendSequence called with tensors of non equal batch dimension: ",
          DescribeSignature(specs), "."));
    }
  }
  for (int64_t t = 0; t < sequence[0].shape[0]; ++t) {
    std::vector<Tensor> step;
    step.reserve(sequence.size());
    for (const Tensor& column : sequence) {
      REVERB_ASSIGN_OR_RETURN(Tensor row, GetRow(column, t));
      step.push_back(std::move(row));
    }
    REVERB_RETURN_IF_ERROR(Append(std::move(step)));
  }
  return absl::OkStatus();
}

absl::Status Writer::CreateItem(const std::string& table, int num_timesteps,
                                double priority, bool hold) {
  REVERB_RETURN_IF_ERROR(CheckOpen("CreateItem"));
  if (num_timesteps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_timesteps (", num_timesteps, ") must be >= 1."));
  }
  // Steps beyond max_timesteps are never buffered (dm-reverb's text).
  if (num_timesteps > std::min<int64_t>(num_steps_, options_.max_timesteps)) {
    return absl::InvalidArgumentError(
        "Argument `num_timesteps` is larger than number of buffered "
        "timesteps.");
  }
  if (std::isnan(priority)) {
    return absl::InvalidArgumentError("`priority` must not be nan.");
  }
  pending_items_.push_back(
      {table, num_steps_ - num_timesteps, num_timesteps, priority, hold});
  return SendReadyItems();
}

absl::Status Writer::InsertStep(
    absl::Span<const TensorView> step,
    absl::Span<const std::pair<std::string, double>> items,
    absl::Duration timeout) {
  REVERB_RETURN_IF_ERROR(AppendViews(step));
  {
    MutexLock lock(&mu_);
    hold_outbox_ = true;
  }
  absl::Status status;
  for (const auto& [table, priority] : items) {
    status = CreateItem(table, 1, priority);
    if (!status.ok()) break;
  }
  // Also after an error: the items created before it go, as they would
  // have.
  WriteOutboxHere();
  REVERB_RETURN_IF_ERROR(status);
  return Flush(timeout);
}

absl::Status Writer::ReleaseHeldItems(const std::vector<bool>& keep) {
  REVERB_RETURN_IF_ERROR(CheckOpen("ReleaseHeldItems"));
  const size_t held =
      std::count_if(pending_items_.begin(), pending_items_.end(),
                    [](const PendingItem& item) { return item.held; });
  if (keep.size() != held) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReleaseHeldItems needs one flag per held item (", held,
                     "), got ", keep.size(), "."));
  }
  std::deque<PendingItem> items;
  size_t next = 0;
  for (PendingItem& item : pending_items_) {
    if (item.held && !keep[next++]) continue;
    item.held = false;
    items.push_back(std::move(item));
  }
  pending_items_ = std::move(items);
  return SendReadyItems();
}

bool Writer::Connected(absl::Duration wait) {
  return stream_ != nullptr ||
         shard_.connection()->WaitForConnection(wait).ok();
}

absl::Status Writer::Flush(absl::Duration timeout) {
  REVERB_RETURN_IF_ERROR(CheckOpen("Flush"));
  const absl::Time deadline = absl::Now() + timeout;
  if (std::any_of(pending_items_.begin(), pending_items_.end(),
                  [](const PendingItem& item) { return item.held; })) {
    return absl::FailedPreconditionError(
        "Items are held: release them before Flush.");
  }
  // Pending items wait for buffered steps; steps no item references stay
  // buffered (their chunk may still grow), as in dm-reverb.
  if (!pending_items_.empty() &&
      pending_items_.back().first_step + pending_items_.back().num_steps >
          chunked_steps_) {
    REVERB_RETURN_IF_ERROR(FinalizeChunk());
  }
  // A timeout shorter than the connect timeout bounds the wait for the
  // connection too; the items stay pending.
  if (stream_ == nullptr && !shard_.sharded() && timeout < kConnectTimeout &&
      !pending_items_.empty() &&
      !shard_.connection()->WaitForConnection(timeout).ok()) {
    return WriterTimeout(static_cast<int64_t>(pending_items_.size()), 0);
  }
  REVERB_RETURN_IF_ERROR(SendReadyItems(/*flushing=*/true));
  while (stream_ != nullptr) {
    size_t awaiting = 0;
    {
      MutexLock lock(&mu_);
      auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return in_flight_.empty() || reader_done_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
      if (in_flight_.empty()) return absl::OkStatus();
      if (!reader_done_) awaiting = in_flight_.size();
    }
    if (awaiting > 0) return WriterTimeout(0, awaiting);
    REVERB_RETURN_IF_ERROR(StreamAgain());
  }
  return absl::OkStatus();
}

absl::Status Writer::NewEpisode() {
  REVERB_RETURN_IF_ERROR(CheckOpen("NewEpisode"));
  if (!buffer_.empty() || !pending_items_.empty()) {
    return absl::FailedPreconditionError(
        "Flush the writer before starting a new episode.");
  }
  episode_id_ = NewRandomKey();
  num_columns_ = -1;
  num_steps_ = 0;
  chunked_steps_ = 0;
  chunks_.clear();
  if (stream_ != nullptr && shard_.sharded()) {
    bool confirmed;
    {
      MutexLock lock(&mu_);
      confirmed = in_flight_.empty();
    }
    if (confirmed && shard_.Rebalance()) {
      // The next item opens a stream to the new shard. Nothing is lost,
      // whatever the old one answers now.
      StopSender();
      stream_->Close().IgnoreError();
      DropStream();
    }
  }
  return absl::OkStatus();
}

absl::Status Writer::Close(absl::Duration timeout) {
  REVERB_RETURN_IF_ERROR(
      closed_ ? absl::FailedPreconditionError("The writer is already closed.")
              : absl::OkStatus());
  absl::Status status = Flush(timeout);
  closed_ = true;
  if (stream_ != nullptr) {
    if (!status.ok()) stream_->Cancel();  // Unblocks the sender.
    StopSender();
    if (status.ok()) status = stream_->Close();
    DropStream();
  }
  shard_.Leave();
  return status;
}

std::string Writer::DebugString() const {
  return absl::StrCat("Writer(chunk_length=", options_.chunk_length,
                      ", max_timesteps=", options_.max_timesteps,
                      ", delta_encoded=", options_.delta_encoded ? 1 : 0,
                      ", max_in_flight_items=", options_.max_in_flight_items,
                      ", episode_id=", episode_id_,
                      ", index_within_episode=", chunked_steps_,
                      ", closed=", closed_ ? 1 : 0, ")");
}

absl::Status Writer::FinalizeChunk() {
  REVERB_RETURN_IF_ERROR(CheckStackable(buffer_));
  REVERB_RETURN_IF_ERROR(AddChunk(
      static_cast<int64_t>(buffer_.size()),
      [&](int c, tensorflow::TensorProto* proto) -> absl::StatusOr<int64_t> {
        std::vector<Tensor> column;
        column.reserve(buffer_.size());
        for (auto& step : buffer_) column.push_back(std::move(step[c]));
        auto stacked = StackTensors(std::move(column));
        if (!stacked.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Column ", c, " changes dtype or shape between steps: ",
              stacked.status().message()));
        }
        if (options_.delta_encoded) DeltaEncode(&*stacked, /*encode=*/true);
        int64_t uncompressed = static_cast<int64_t>(stacked->bytes.size());
        for (const auto& s : stacked->strings) uncompressed += s.size();
        REVERB_RETURN_IF_ERROR(
            CompressTensorAsProto(*std::move(stacked), proto));
        return uncompressed;
      }));
  buffer_.clear();
  return absl::OkStatus();
}

Writer::ChunkInfoAndHeader Writer::NextChunk(int64_t rows) const {
  ChunkInfoAndHeader next;
  ChunkInfo& chunk = next.info;
  chunk.key = NewRandomKey();
  chunk.first_step = chunked_steps_;
  chunk.last_step = chunked_steps_ + rows - 1;
  ChunkData& data = next.header;
  data.set_chunk_key(chunk.key);
  data.mutable_sequence_range()->set_episode_id(episode_id_);
  data.mutable_sequence_range()->set_start(
      static_cast<int32_t>(chunk.first_step));
  data.mutable_sequence_range()->set_end(static_cast<int32_t>(chunk.last_step));
  data.set_delta_encoded(options_.delta_encoded);
  data.set_data_tensors_len(num_columns_);
  return next;
}

absl::Status Writer::AddChunk(
    int64_t rows,
    absl::FunctionRef<absl::StatusOr<int64_t>(int c, tensorflow::TensorProto*)>
        compress) {
  ChunkInfoAndHeader next = NextChunk(rows);
  std::shared_ptr<ChunkData> chunk_data = NewArenaChunk();
  ChunkData& data = *chunk_data;
  data = std::move(next.header);
  int64_t uncompressed = 0;
  for (int c = 0; c < num_columns_; ++c) {
    REVERB_ASSIGN_OR_RETURN(const int64_t bytes,
                            compress(c, data.mutable_data()->add_tensors()));
    uncompressed += bytes;
  }
  data.set_data_uncompressed_size(uncompressed);
  next.info.data = std::move(chunk_data);
  chunks_.push_back(std::move(next.info));
  chunked_steps_ += rows;
  return absl::OkStatus();
}

bool Writer::BuildInSegment(const TensorView& cell) {
  std::shared_ptr<const SharedMemoryClient> segments =
      shard_.connection()->KnownSharedMemory();
  if (segments == nullptr) return false;
  TensorView row = cell;
  row.shape.insert(row.shape.begin(), 1);
  if (!CheckElements(row).ok()) return false;  // AddChunk says why.
  ChunkInfoAndHeader next = NextChunk(1);
  next.header.set_data_uncompressed_size(
      static_cast<int64_t>(row.bytes.size()));
  next.info.data = segments->BuildStoredChunk(std::move(next.header), row);
  if (next.info.data == nullptr) return false;
  chunks_.push_back(std::move(next.info));
  chunked_steps_ += 1;
  return true;
}

int Writer::ReadyItems() const {
  int ready = 0;
  for (const PendingItem& item : pending_items_) {
    if (item.held || item.first_step + item.num_steps > chunked_steps_) break;
    ++ready;
  }
  return ready;
}

absl::Status Writer::SendReadyItems(bool flushing) {
  if (stream_ == nullptr && !shard_.sharded() && !flushing) {
    const int ready = ReadyItems();
    if (ready > 0 && ready < options_.max_in_flight_items && !Connected()) {
      PruneChunks();
      return absl::OkStatus();
    }
  }
  while (!pending_items_.empty()) {
    const PendingItem& item = pending_items_.front();
    if (item.held || item.first_step + item.num_steps > chunked_steps_) break;
    absl::Status status = SendItem(item);
    pending_items_.pop_front();
    if (!status.ok()) {
      status_ = status;
      return status;
    }
  }
  PruneChunks();
  return absl::OkStatus();
}

void Writer::PruneChunks() {
  int64_t first_needed = num_steps_ - options_.max_timesteps;
  for (const auto& item : pending_items_) {
    first_needed = std::min(first_needed, item.first_step);
  }
  while (!chunks_.empty() && chunks_.front().last_step < first_needed) {
    chunks_.pop_front();
  }
}

absl::Status Writer::SendItem(const PendingItem& pending) {
  if (stream_ == nullptr) REVERB_RETURN_IF_ERROR(StartStream());
  while (true) {
    bool broken;
    {
      MutexLock lock(&mu_);
      auto has_room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return reader_done_ || write_failed_ ||
               static_cast<int>(in_flight_.size()) <
                   options_.max_in_flight_items;
      };
      // Room comes with confirmations: the sender must not wait for the
      // caller (InsertStep) meanwhile.
      if (!has_room()) hold_outbox_ = false;
      mu_.Await(absl::Condition(&has_room));
      broken = reader_done_ || write_failed_;
    }
    if (!broken) break;
    REVERB_RETURN_IF_ERROR(StreamAgain());
  }

  InsertStreamRequest request;
  PrioritizedItem* item = request.add_items();
  item->set_key(NewRandomKey());
  item->set_table(pending.table);
  item->set_priority(pending.priority);
  *item->mutable_inserted_at() =
      google::protobuf::util::TimeUtil::GetCurrentTime();
  const int64_t first = pending.first_step;
  const int64_t last = pending.first_step + pending.num_steps - 1;
  InFlightItem record;
  record.seq = next_seq_++;
  std::vector<FlatTrajectory::ChunkSlice> slices;
  std::vector<std::shared_ptr<const ChunkData>> new_chunks;
  int64_t bytes = 0;
  for (ChunkInfo& chunk : chunks_) {
    if (chunk.last_step < first || chunk.first_step > last) continue;
    FlatTrajectory::ChunkSlice slice;
    slice.set_chunk_key(chunk.key);
    const int64_t start = std::max(first, chunk.first_step);
    slice.set_offset(static_cast<int32_t>(start - chunk.first_step));
    slice.set_length(
        static_cast<int32_t>(std::min(last, chunk.last_step) - start + 1));
    slices.push_back(slice);
    if (shard_.sharded()) record.chunks.push_back(chunk.data);
    if (!chunk.sent) {
      bytes += static_cast<int64_t>(ChunkWireSize(chunk.data));
      new_chunks.push_back(chunk.data);
      chunk.sent = true;
    }
  }
  for (int c = 0; c < num_columns_; ++c) {
    auto* column = item->mutable_flat_trajectory()->add_columns();
    for (auto slice : slices) {
      slice.set_index(c);
      *column->add_chunk_slices() = slice;
    }
  }
  PruneChunks();
  if (shard_.sharded()) {
    record.item = *item;
    record.sent_to.push_back(shard_.index());
  }
  for (const ChunkInfo& chunk : chunks_) {
    if (chunk.sent) request.add_keep_chunk_keys(chunk.key);
  }
  MutexLock lock(&mu_);
  in_flight_.emplace(item->key(), std::move(record));
  outbox_.push_back({std::move(request), std::move(new_chunks), bytes});
  return absl::OkStatus();
}

void Writer::SendRequests() {
  while (true) {
    InsertStreamRequest request;
    std::vector<std::shared_ptr<const ChunkData>> chunks;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !writing_ &&
               (stop_sending_ || (!outbox_.empty() && !hold_outbox_));
      };
      mu_.Await(absl::Condition(&ready));
      if (outbox_.empty()) return;
      TakeOutboxLocked(&request, &chunks);
    }
    if (!WriteTaken(request, chunks, InsertStream::Then::kMoreChunksFollow)) {
      return;
    }
  }
}

void Writer::TakeOutboxLocked(
    InsertStreamRequest* request,
    std::vector<std::shared_ptr<const ChunkData>>* chunks) {
  *request = std::move(outbox_.front().request);
  *chunks = std::move(outbox_.front().chunks);
  int64_t bytes = outbox_.front().bytes;
  outbox_.pop_front();
  // Later requests join: their chunks and items after ours, and their
  // keep_chunk_keys (a server applies them after the items) replace ours.
  while (!outbox_.empty() &&
         bytes + outbox_.front().bytes <= kMaxMergedRequestBytes) {
    InsertStreamRequest& next = outbox_.front().request;
    for (auto& chunk : outbox_.front().chunks) {
      chunks->push_back(std::move(chunk));
    }
    for (PrioritizedItem& item : *next.mutable_items()) {
      request->mutable_items()->Add(std::move(item));
    }
    *request->mutable_keep_chunk_keys() =
        std::move(*next.mutable_keep_chunk_keys());
    bytes += outbox_.front().bytes;
    outbox_.pop_front();
  }
  writing_ = true;
}

bool Writer::WriteTaken(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks,
    InsertStream::Then then) {
  const bool written = stream_->Write(request, chunks, then);
  MutexLock lock(&mu_);
  writing_ = false;
  if (!written) {
    // The call has ended; the reader learns why.
    write_failed_ = true;
    outbox_.clear();
  }
  return written;
}

void Writer::WriteOutboxHere() {
  InsertStreamRequest request;
  std::vector<std::shared_ptr<const ChunkData>> chunks;
  {
    MutexLock lock(&mu_);
    hold_outbox_ = false;
    // A write the sender began before the hold ends first.
    auto idle = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !writing_; };
    mu_.Await(absl::Condition(&idle));
    if (outbox_.empty()) return;
    TakeOutboxLocked(&request, &chunks);
  }
  WriteTaken(request, chunks, InsertStream::Then::kWaitForConfirmations);
}

void Writer::StopSender() {
  {
    MutexLock lock(&mu_);
    stop_sending_ = true;
  }
  if (sender_.joinable()) sender_.join();
}

absl::Status Writer::StartStream() {
  absl::Status status = OpenStream();
  while (!status.ok() && shard_.sharded()) {
    REVERB_ASSIGN_OR_RETURN(absl::Duration delay,
                            shard_.OnStreamFailed(status, stream_started_));
    absl::SleepFor(delay);
    status = OpenStream();
  }
  return status;
}

absl::Status Writer::OpenStream() {
  {
    MutexLock lock(&mu_);
    reader_done_ = false;
    write_failed_ = false;
    stop_sending_ = false;
    outbox_.clear();
  }
  stream_started_ = absl::Now();
  std::shared_ptr<const Connection> connection = shard_.connection();
  const int shard = shard_.index();
  REVERB_ASSIGN_OR_RETURN(
      stream_, InsertStream::Open(
                   std::move(connection),
                   shard_.sharded() ? absl::Milliseconds(250) : kConnectTimeout,
                   [this, shard](absl::Span<const uint64_t> keys) {
                     MutexLock lock(&mu_);
                     for (uint64_t key : keys) {
                       auto it = in_flight_.find(key);
                       if (it == in_flight_.end()) continue;
                       shard_.Confirmed(shard, it->second.item.table(), key,
                                        it->second.sent_to);
                       in_flight_.erase(it);
                     }
                   },
                   [this] {
                     MutexLock lock(&mu_);
                     reader_done_ = true;
                   }));
  watch_ = shard_.WatchShard([raw = stream_.get()] { raw->Cancel(); });
  sender_ = std::thread([this] { SendRequests(); });
  SetThreadName(sender_, "reverb-writer");
  return absl::OkStatus();
}

absl::Status Writer::StreamAgain() {
  {
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&reader_done_));
  }
  StopSender();
  absl::Status status = stream_->Finish();
  DropStream();
  if (shard_.sharded()) {
    absl::StatusOr<absl::Duration> delay =
        shard_.OnStreamFailed(status, stream_started_);
    if (delay.ok()) {
      absl::SleepFor(*delay);
      status = StartStream();
    } else {
      status = delay.status();
    }
  }
  status_ = status;
  if (!status.ok()) return status;

  // Every unconfirmed item again, in order, in one request with the chunks
  // they use, keeping those later items may use.
  for (ChunkInfo& chunk : chunks_) chunk.sent = false;
  MutexLock lock(&mu_);
  if (in_flight_.empty()) return absl::OkStatus();
  std::vector<InFlightItem*> items;
  for (auto& [key, item] : in_flight_) items.push_back(&item);
  std::sort(items.begin(), items.end(),
            [](const InFlightItem* a, const InFlightItem* b) {
              return a->seq < b->seq;
            });
  Outgoing out;
  out.bytes = 0;
  absl::flat_hash_set<uint64_t> sent;
  for (InFlightItem* item : items) {
    *out.request.add_items() = item->item;
    for (const auto& chunk : item->chunks) {
      if (sent.insert(chunk->chunk_key()).second) {
        out.bytes += static_cast<int64_t>(ChunkWireSize(chunk));
        out.chunks.push_back(chunk);
      }
    }
    AddSentTo(shard_.index(), &item->sent_to);
  }
  for (ChunkInfo& chunk : chunks_) {
    chunk.sent = sent.contains(chunk.key);
    if (chunk.sent) out.request.add_keep_chunk_keys(chunk.key);
  }
  outbox_.push_back(std::move(out));
  return absl::OkStatus();
}

void Writer::DropStream() {
  StopSender();
  watch_.reset();
  stream_.reset();
}

}  // namespace deepmind::reverb
