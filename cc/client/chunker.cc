#include "cc/client/chunker.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cc/client/arena_chunk.h"
#include "cc/client/built_chunk.h"
#include "cc/client/sample.h"
#include "cc/client/shared_memory_client.h"
#include "cc/support/buffer_pool.h"
#include "cc/support/mutex.h"
#include "cc/support/random_key.h"
#include "cc/support/status_macros.h"
#include "cc/tensor/compression.h"
#include "cc/tensor/signature.h"

namespace deepmind::reverb {
namespace {

// The steps in a TrajectoryWriter chunk (one tensor, time along dim 0).
int64_t ChunkRows(const ChunkData& chunk) {
  if (chunk.data().tensors_size() == 0) return 0;
  const auto& shape = chunk.data().tensors(0).tensor_shape();
  return shape.dim_size() == 0 ? 0 : shape.dim(0).size();
}

}  // namespace

// --- Options -----------------------------------------------------------------

absl::Status ChunkerOptions::Validate() const {
  if (GetNumKeepAliveRefs() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_keep_alive_refs (", GetNumKeepAliveRefs(), ") must be >= 1."));
  }
  if (GetMaxChunkLength() < 1 || GetMaxChunkLength() > GetNumKeepAliveRefs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_chunk_length (", GetMaxChunkLength(),
                     ") must be in [1, num_keep_alive_refs (",
                     GetNumKeepAliveRefs(), ")]."));
  }
  return absl::OkStatus();
}

AutoTunedChunkerOptions::AutoTunedChunkerOptions(int num_keep_alive_refs,
                                                 double throughput_weight,
                                                 bool delta_encode)
    : num_keep_alive_refs_(num_keep_alive_refs),
      throughput_weight_(throughput_weight),
      delta_encode_(delta_encode) {}

int AutoTunedChunkerOptions::GetMaxChunkLength() const {
  MutexLock lock(&mu_);
  return max_chunk_length_;
}

void AutoTunedChunkerOptions::OnChunkFinalized(int64_t bytes, int rows) {
  MutexLock lock(&mu_);
  chunks_.emplace_back(bytes, rows);
  if (static_cast<int>(chunks_.size()) > kNumChunksToScore) chunks_.pop_front();
  MaybeTune();
}

void AutoTunedChunkerOptions::OnItemFinalized(
    absl::Span<const std::shared_ptr<CellRef>> refs) {
  // Bytes the item makes the writer send: its chunks, each counted once.
  // An item's column spans few chunks: a linear search beats a hash set.
  absl::InlinedVector<uint64_t, 8> seen;
  int64_t bytes = 0;
  int64_t rows = 0;
  for (const auto& ref : refs) {
    if (absl::c_linear_search(seen, ref->chunk_key())) continue;
    seen.push_back(ref->chunk_key());
    if (auto chunk = ref->GetChunk()) {
      bytes += static_cast<int64_t>(ChunkWireSize(chunk));
      rows += ChunkRows(*chunk);
    }
  }
  if (refs.empty()) return;
  MutexLock lock(&mu_);
  // Items are sent after their chunks were finalized, often after later
  // chunks were (a batch of steps, then its items): an item of chunks of
  // another length than the current one would score that length with the
  // cost of an older one, and the length drifted up (items of one step
  // came to send chunks of up to 15 steps each).
  if (std::abs(static_cast<double>(rows) / seen.size() - max_chunk_length_) >
      kLengthTolerance) {
    return;
  }
  items_.emplace_back(bytes, static_cast<int>(refs.size()));
  if (static_cast<int>(items_.size()) > kNumItemsToScore) items_.pop_front();
}

void AutoTunedChunkerOptions::MaybeTune() {
  if (static_cast<int>(chunks_.size()) < kNumChunksToScore ||
      static_cast<int>(items_.size()) < kNumItemsToScore) {
    return;
  }
  auto per_step = [](const std::deque<std::pair<int64_t, int>>& stats) {
    double bytes = 0, steps = 0;
    for (const auto& [b, s] : stats) {
      bytes += b;
      steps += s;
    }
    return bytes / std::max(1.0, steps);
  };
  double rows = 0;
  for (const auto& chunk : chunks_) rows += chunk.second;
  const double average_length = rows / chunks_.size();
  const double cost = per_step(chunks_) + kChunkCostBytes / average_length +
                      throughput_weight_ * per_step(items_);
  const int scored_length = max_chunk_length_;
  if (!previous_cost_.has_value()) {
    last_change_grew_ = true;
    max_chunk_length_ = std::min(max_chunk_length_ + 2, num_keep_alive_refs_);
  } else if (std::abs(average_length - max_chunk_length_) <= kLengthTolerance) {
    // The windows describe the current length: keep going the same way if
    // that lowered the cost, else turn back. At a bound the last move was
    // clamped away and this length is scored again: it stays there unless
    // its cost rose by more than kBoundTolerance (the data changed).
    // Turning back on a tie (or on a byte more, as chunk keys vary in
    // size) left the best length every other time: items of one step of
    // large, incompressible data, best sent in chunks of one step, went in
    // chunks of 1, 3 and 2 steps in turn.
    const bool lower = scored_length == previous_length_
                           ? cost <= *previous_cost_ * (1 + kBoundTolerance)
                           : cost < *previous_cost_;
    const bool grow = lower == last_change_grew_;
    last_change_grew_ = grow;
    max_chunk_length_ = std::clamp(max_chunk_length_ + (grow ? 2 : -1), 1,
                                   num_keep_alive_refs_);
  } else {
    return;  // Statistics of an older length; wait for fresh ones.
  }
  previous_cost_ = cost;
  previous_length_ = scored_length;
  chunks_.clear();
  items_.clear();
}

// --- CellRef -----------------------------------------------------------------

CellRef::CellRef(std::weak_ptr<Chunker> chunker, uint64_t chunk_key, int offset,
                 uint64_t episode_id, int32_t episode_step,
                 tensorflow::DataType dtype,
                 std::shared_ptr<const std::vector<int64_t>> shape)
    : chunker_(std::move(chunker)),
      chunk_key_(chunk_key),
      offset_(offset),
      episode_id_(episode_id),
      episode_step_(episode_step),
      dtype_(dtype),
      shape_(std::move(shape)) {}

bool CellRef::IsReady() const {
  MutexLock lock(&mu_);
  return chunk_ != nullptr;
}

std::shared_ptr<const ChunkData> CellRef::GetChunk() const {
  MutexLock lock(&mu_);
  return chunk_;
}

void CellRef::SetChunk(std::shared_ptr<const ChunkData> chunk) {
  MutexLock lock(&mu_);
  chunk_ = std::move(chunk);
}

namespace {

absl::StatusOr<Tensor> RowOfChunk(std::shared_ptr<const ChunkData> chunk,
                                  int row) {
  REVERB_ASSIGN_OR_RETURN(chunk, WholeChunk(std::move(chunk)));
  REVERB_ASSIGN_OR_RETURN(Tensor column, UnpackChunkTensor(*chunk, 0));
  return GetRow(column, row);
}

}  // namespace

absl::StatusOr<Tensor> CellRef::GetData() const {
  if (auto chunk = GetChunk()) return RowOfChunk(std::move(chunk), offset_);
  if (auto chunker = GetChunker()) {
    auto buffered = chunker->CopyDataForCell(*this);
    if (buffered.ok()) return buffered;
  }
  // Finalized meanwhile?
  if (auto chunk = GetChunk()) return RowOfChunk(std::move(chunk), offset_);
  return absl::FailedPreconditionError(
      "The cell's chunk was never finalized and its chunker has dropped it.");
}

// --- Chunker -----------------------------------------------------------------

Chunker::Chunker(int column, std::shared_ptr<ChunkerOptions> options)
    : column_(column),
      options_(std::move(options)),
      next_chunk_key_(NewRandomKey()) {}

std::shared_ptr<ChunkerOptions> Chunker::options() const {
  MutexLock lock(&mu_);
  return options_;
}

absl::Status Chunker::CanAppend(tensorflow::DataType dtype,
                                absl::Span<const int64_t> shape,
                                uint64_t episode_id,
                                int32_t episode_step) const {
  MutexLock lock(&mu_);
  return CanAppendLocked(dtype, shape, episode_id, episode_step);
}

absl::Status Chunker::CanAppendLocked(tensorflow::DataType dtype,
                                      absl::Span<const int64_t> shape,
                                      uint64_t episode_id,
                                      int32_t episode_step) const {
  if (dtype_.has_value() && dtype != *dtype_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Tensor of wrong dtype provided for column ", column_, ". Got ",
        DataTypeName(dtype), " but expected ", DataTypeName(*dtype_), "."));
  }
  if (dtype_.has_value() && shape != absl::MakeConstSpan(*shape_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Tensor of incompatible shape provided for column ", column_, ". Got [",
        absl::StrJoin(shape, ","), "] which is incompatible with [",
        absl::StrJoin(*shape_, ","), "]."));
  }
  if (!buffer_refs_.empty() &&
      buffer_refs_.back()->episode_id() == episode_id &&
      buffer_refs_.back()->episode_step() >= episode_step) {
    return absl::FailedPreconditionError(
        absl::StrCat("Column ", column_, " already has step ", episode_step,
                     " (column present in previous AppendPartial)."));
  }
  return absl::OkStatus();
}

absl::Status Chunker::StartCellLocked(tensorflow::DataType dtype,
                                      absl::Span<const int64_t> shape,
                                      uint64_t episode_id) {
  if (!dtype_.has_value()) {
    dtype_ = dtype;
    shape_ = std::make_shared<const std::vector<int64_t>>(shape.begin(),
                                                          shape.end());
  }
  // A chunk holds steps of one episode.
  if (!buffer_refs_.empty() &&
      buffer_refs_.back()->episode_id() != episode_id) {
    REVERB_RETURN_IF_ERROR(FinalizeLocked());
  }
  return absl::OkStatus();
}

std::shared_ptr<CellRef> Chunker::NewRefLocked(uint64_t episode_id,
                                               int32_t episode_step) {
  auto ref = std::make_shared<CellRef>(
      weak_from_this(), next_chunk_key_, static_cast<int>(buffer_refs_.size()),
      episode_id, episode_step, *dtype_, shape_);
  buffer_refs_.push_back(ref);
  active_refs_.push_back(ref);
  while (static_cast<int>(active_refs_.size()) >
         options_->GetNumKeepAliveRefs()) {
    active_refs_.pop_front();
  }
  return ref;
}

absl::StatusOr<std::shared_ptr<CellRef>> Chunker::Append(
    const TensorView& cell, uint64_t episode_id, int32_t episode_step,
    const SharedMemoryClient* segments) {
  TensorView row = cell;
  row.shape.insert(row.shape.begin(), 1);
  REVERB_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<CellRef>> refs,
                          AppendRows(row, episode_id, episode_step, segments));
  return std::move(refs.front());
}

absl::StatusOr<std::vector<std::shared_ptr<CellRef>>> Chunker::AppendRows(
    const TensorView& rows, uint64_t episode_id, int32_t first_step,
    const SharedMemoryClient* segments) {
  if (rows.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Rows for column ", column_, " need a leading dimension, got ",
        DescribeTensor(rows), "."));
  }
  REVERB_RETURN_IF_ERROR(CheckElements(rows));
  const int64_t num_rows = rows.shape[0];
  const auto row_shape = absl::MakeConstSpan(rows.shape).subspan(1);
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<CellRef>> refs;
  if (num_rows == 0) return refs;
  REVERB_RETURN_IF_ERROR(
      CanAppendLocked(rows.dtype, row_shape, episode_id, first_step));
  REVERB_RETURN_IF_ERROR(StartCellLocked(rows.dtype, row_shape, episode_id));
  // Delta encoding rewrites the rows, so it takes the buffered path.
  const bool direct = !rows.IsString() && !options_->GetDeltaEncode();
  const int64_t row_bytes = static_cast<int64_t>(rows.bytes.size()) / num_rows;
  refs.reserve(num_rows);
  for (int64_t t = 0; t < num_rows;) {
    const int32_t step = first_step + static_cast<int32_t>(t);
    const int length = options_->GetMaxChunkLength();
    const int buffered = static_cast<int>(buffer_refs_.size());
    // Whole chunks of rows are compressed where they are; other rows are
    // copied to the buffer, as many at once as fit in the chunk.
    const int64_t n =
        direct && buffered == 0 && num_rows - t >= length
            ? length
            : std::min<int64_t>(num_rows - t, std::max(1, length - buffered));
    REVERB_ASSIGN_OR_RETURN(TensorView chunk_rows, ViewRows(rows, t, n));
    const bool whole_chunk = direct && buffered == 0 && n == length;
    if (!whole_chunk) {
      if (buffered == 0 && !rows.IsString()) {
        // Room for the whole chunk; a large one in a recycled buffer, after
        // room for the header of the stored stream its rows become if
        // snappy does not shrink them (compression.h): no copy then.
        const size_t bytes = static_cast<size_t>(row_bytes) * length;
        headroom_ = direct && bytes >= BufferPool::kMinBytes
                        ? StoredHeader(bytes).size()
                        : 0;
        buffer_.bytes = BufferPool::Default().Reserve(headroom_ + bytes);
        buffer_.bytes.resize(headroom_);
      }
      REVERB_RETURN_IF_ERROR(reverb::AppendRows(chunk_rows, &buffer_));
    }
    for (int i = 0; i < n; ++i) {
      refs.push_back(NewRefLocked(episode_id, step + static_cast<int32_t>(i)));
    }
    t += n;
    if (whole_chunk) {
      std::shared_ptr<const ChunkData> built =
          segments == nullptr ? nullptr
                              : BuildInSegmentLocked(chunk_rows, *segments);
      if (built != nullptr) {
        AttachChunkLocked(std::move(built));
        continue;
      }
      REVERB_RETURN_IF_ERROR(FinalizeRefsLocked(
          static_cast<int64_t>(chunk_rows.bytes.size()),
          /*delta_encoded=*/false, [&](tensorflow::TensorProto* proto) {
            return CompressTensorAsProto(chunk_rows, proto);
          }));
    } else if (static_cast<int>(buffer_refs_.size()) >= length) {
      REVERB_RETURN_IF_ERROR(FinalizeLocked());
    }
  }
  return refs;
}

absl::Status Chunker::Flush() {
  MutexLock lock(&mu_);
  return FinalizeLocked();
}

absl::Status Chunker::FinalizeLocked() {
  if (buffer_refs_.empty()) return absl::OkStatus();
  Tensor stacked = std::exchange(buffer_, Tensor());
  const size_t headroom = std::exchange(headroom_, 0);
  const int64_t uncompressed =
      static_cast<int64_t>(stacked.bytes.size() - headroom);
  const bool delta = options_->GetDeltaEncode();
  if (delta) DeltaEncode(&stacked, /*encode=*/true);
  return FinalizeRefsLocked(
      uncompressed, delta,
      [&stacked, headroom](tensorflow::TensorProto* proto) {
        return CompressTensorAsProto(std::move(stacked), headroom, proto);
      });
}

absl::Status Chunker::FinalizeRefsLocked(
    int64_t uncompressed_bytes, bool delta_encoded,
    absl::FunctionRef<absl::Status(tensorflow::TensorProto*)> compress) {
  std::shared_ptr<ChunkData> chunk = NewArenaChunk();
  REVERB_RETURN_IF_ERROR(compress(chunk->mutable_data()->add_tensors()));
  SetChunkFieldsLocked(uncompressed_bytes, delta_encoded, chunk.get());
  AttachChunkLocked(std::move(chunk));
  return absl::OkStatus();
}

void Chunker::SetChunkFieldsLocked(int64_t uncompressed_bytes,
                                   bool delta_encoded, ChunkData* chunk) const {
  chunk->set_chunk_key(next_chunk_key_);
  chunk->set_data_tensors_len(1);
  chunk->set_data_uncompressed_size(uncompressed_bytes);
  chunk->set_delta_encoded(delta_encoded);
  SequenceRange* range = chunk->mutable_sequence_range();
  range->set_episode_id(buffer_refs_.front()->episode_id());
  range->set_start(buffer_refs_.front()->episode_step());
  range->set_end(buffer_refs_.back()->episode_step());
  range->set_sparse(range->end() - range->start() + 1 !=
                    static_cast<int32_t>(buffer_refs_.size()));
}

std::shared_ptr<const ChunkData> Chunker::BuildInSegmentLocked(
    const TensorView& rows, const SharedMemoryClient& segments) const {
  ChunkData header;
  SetChunkFieldsLocked(static_cast<int64_t>(rows.bytes.size()),
                       /*delta_encoded=*/false, &header);
  return segments.BuildStoredChunk(std::move(header), rows);
}

void Chunker::AttachChunkLocked(std::shared_ptr<const ChunkData> chunk) {
  for (const auto& ref : buffer_refs_) ref->SetChunk(chunk);
  // Sizes the chunk once: later readers take its cached size.
  options_->OnChunkFinalized(static_cast<int64_t>(ChunkWireSize(chunk)),
                             static_cast<int>(buffer_refs_.size()));
  buffer_refs_.clear();
  next_chunk_key_ = NewRandomKey();
}

void Chunker::Reset() {
  MutexLock lock(&mu_);
  buffer_ = Tensor();
  headroom_ = 0;
  buffer_refs_.clear();
  active_refs_.clear();
  next_chunk_key_ = NewRandomKey();
}

absl::Status Chunker::ApplyConfig(std::shared_ptr<ChunkerOptions> options) {
  REVERB_RETURN_IF_ERROR(options->Validate());
  MutexLock lock(&mu_);
  if (!buffer_refs_.empty()) {
    return absl::FailedPreconditionError(
        "Chunker options can only be changed while no steps are buffered.");
  }
  options_ = std::move(options);
  while (static_cast<int>(active_refs_.size()) >
         options_->GetNumKeepAliveRefs()) {
    active_refs_.pop_front();
  }
  return absl::OkStatus();
}

std::vector<uint64_t> Chunker::GetKeepKeys() const {
  MutexLock lock(&mu_);
  std::vector<uint64_t> keys;
  for (const auto& ref : active_refs_) {
    if (keys.empty() || keys.back() != ref->chunk_key()) {
      keys.push_back(ref->chunk_key());
    }
  }
  return keys;
}

absl::StatusOr<Tensor> Chunker::CopyDataForCell(const CellRef& ref) const {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < buffer_refs_.size(); ++i) {
    if (buffer_refs_[i].get() == &ref) {
      TensorView rows(buffer_);
      rows.bytes.remove_prefix(headroom_);
      return GetRow(rows, i);
    }
  }
  return absl::FailedPreconditionError("The cell is not buffered.");
}

}  // namespace deepmind::reverb
