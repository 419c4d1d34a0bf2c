// Column-wise chunking for the TrajectoryWriter.
//
// A Chunker buffers the steps of one column (one leaf of the appended
// structure). When the buffer holds `max_chunk_length` rows (or on Flush) it
// becomes a chunk: the rows stacked along a new time dimension, optionally
// delta-encoded, snappy-compressed into one TensorProto (so `index` 0 in
// every ChunkSlice). Each appended step gets a CellRef that names its chunk
// and row before the chunk exists; the chunk is attached to the refs when
// it is finalized.
//
// The chunker keeps the last `num_keep_alive_refs` refs alive; older ones
// live on only while an item (or the caller) holds them. Python sees refs as
// weak references, so `history` expires.
//
// ChunkerOptions decide the chunk length: ConstantChunkerOptions a fixed
// one; AutoTunedChunkerOptions tunes it from the chunks and items it sees
// (a smaller average of bytes per step stored plus bytes per step sent for
// items is better), as dm-reverb, with each chunk also charged
// kChunkCostBytes (so steps of a few bytes get longer chunks); it scores a
// length only with chunks and items of that length, and at a bound (1,
// num_keep_alive_refs) stays put while the cost does not rise much.
// AutoTunedChunkerOptions is thread-safe.
#ifndef REVERB_CC_CLIENT_CHUNKER_H_
#define REVERB_CC_CLIENT_CHUNKER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "cc/tensor/tensor.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

class CellRef;
class SharedMemoryClient;  // shared_memory_client.h

class REVERB_EXPORT ChunkerOptions {
 public:
  virtual ~ChunkerOptions() = default;
  virtual int GetMaxChunkLength() const = 0;
  virtual int GetNumKeepAliveRefs() const = 0;
  virtual bool GetDeltaEncode() const = 0;
  // Called when a chunk of this column is finalized.
  virtual void OnChunkFinalized(int64_t bytes, int rows) {}
  // Called when an item is sent; `refs` are its cells of this column.
  virtual void OnItemFinalized(
      absl::Span<const std::shared_ptr<CellRef>> refs) {}
  // A copy with fresh state, for another column.
  virtual std::shared_ptr<ChunkerOptions> Clone() const = 0;
  // INVALID_ARGUMENT unless 1 <= max_chunk_length <= num_keep_alive_refs.
  absl::Status Validate() const;
};

class REVERB_EXPORT ConstantChunkerOptions : public ChunkerOptions {
 public:
  ConstantChunkerOptions(int max_chunk_length, int num_keep_alive_refs,
                         bool delta_encode = false)
      : max_chunk_length_(max_chunk_length),
        num_keep_alive_refs_(num_keep_alive_refs),
        delta_encode_(delta_encode) {}
  int GetMaxChunkLength() const override { return max_chunk_length_; }
  int GetNumKeepAliveRefs() const override { return num_keep_alive_refs_; }
  bool GetDeltaEncode() const override { return delta_encode_; }
  std::shared_ptr<ChunkerOptions> Clone() const override {
    return std::make_shared<ConstantChunkerOptions>(*this);
  }

 private:
  int max_chunk_length_;
  int num_keep_alive_refs_;
  bool delta_encode_;
};

class REVERB_EXPORT AutoTunedChunkerOptions : public ChunkerOptions {
 public:
  // Statistics windows.
  static constexpr int kNumItemsToScore = 10;
  static constexpr int kNumChunksToScore = 5;
  // Statistics are of the current length if their chunks average it within
  // this many rows.
  static constexpr double kLengthTolerance = 0.25;
  // At a bound of the length, a cost at most this much (relative) above
  // the last one scored there keeps it there.
  static constexpr double kBoundTolerance = 0.05;
  // What handling a chunk costs the writer and the server besides its
  // bytes (a message, a table entry), as bytes, per chunk.
  static constexpr double kChunkCostBytes = 1024;

  explicit AutoTunedChunkerOptions(int num_keep_alive_refs,
                                   double throughput_weight = 1.0,
                                   bool delta_encode = false);
  int GetMaxChunkLength() const override;
  int GetNumKeepAliveRefs() const override { return num_keep_alive_refs_; }
  bool GetDeltaEncode() const override { return delta_encode_; }
  double throughput_weight() const { return throughput_weight_; }
  void OnChunkFinalized(int64_t bytes, int rows) override;
  void OnItemFinalized(
      absl::Span<const std::shared_ptr<CellRef>> refs) override;
  std::shared_ptr<ChunkerOptions> Clone() const override {
    return std::make_shared<AutoTunedChunkerOptions>(
        num_keep_alive_refs_, throughput_weight_, delta_encode_);
  }

 private:
  // Scores the current length once both windows are full, then moves it.
  void MaybeTune() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_keep_alive_refs_;
  const double throughput_weight_;
  const bool delta_encode_;
  mutable Mutex mu_;
  int max_chunk_length_ ABSL_GUARDED_BY(mu_) = 1;
  // (bytes, steps) of the latest chunks and items.
  std::deque<std::pair<int64_t, int>> chunks_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, int>> items_ ABSL_GUARDED_BY(mu_);
  // The cost of the length scored last, and that length.
  std::optional<double> previous_cost_ ABSL_GUARDED_BY(mu_);
  int previous_length_ ABSL_GUARDED_BY(mu_) = 0;
  bool last_change_grew_ ABSL_GUARDED_BY(mu_) = true;
};

class Chunker;

// One cell: row `offset` of chunk `chunk_key`, step `episode_step` of
// episode `episode_id`. Thread-safe.
class REVERB_EXPORT CellRef {
 public:
  // `shape` is shared by the cells of a column.
  CellRef(std::weak_ptr<Chunker> chunker, uint64_t chunk_key, int offset,
          uint64_t episode_id, int32_t episode_step, tensorflow::DataType dtype,
          std::shared_ptr<const std::vector<int64_t>> shape);

  uint64_t chunk_key() const { return chunk_key_; }
  int offset() const { return offset_; }
  uint64_t episode_id() const { return episode_id_; }
  int32_t episode_step() const { return episode_step_; }
  tensorflow::DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return *shape_; }

  // True once the chunk is finalized.
  bool IsReady() const;
  // The chunk, or null until it is finalized.
  std::shared_ptr<const ChunkData> GetChunk() const;
  // The chunker that buffers the cell (null once it is gone).
  std::shared_ptr<Chunker> GetChunker() const { return chunker_.lock(); }

  // The cell's data (decompressed from the chunk, or copied from the
  // chunker's buffer). FAILED_PRECONDITION if it is neither.
  absl::StatusOr<Tensor> GetData() const;

 private:
  friend class Chunker;
  void SetChunk(std::shared_ptr<const ChunkData> chunk);

  const std::weak_ptr<Chunker> chunker_;
  const uint64_t chunk_key_;
  const int offset_;
  const uint64_t episode_id_;
  const int32_t episode_step_;
  const tensorflow::DataType dtype_;
  const std::shared_ptr<const std::vector<int64_t>> shape_;
  mutable Mutex mu_;
  std::shared_ptr<const ChunkData> chunk_ ABSL_GUARDED_BY(mu_);
};

// Buffers and chunks one column. Thread-safe.
class REVERB_EXPORT Chunker : public std::enable_shared_from_this<Chunker> {
 public:
  // `column` names the column in error messages.
  Chunker(int column, std::shared_ptr<ChunkerOptions> options);

  // Appends `cell` as step `episode_step` of `episode_id`. The first
  // append fixes the column's dtype and shape. INVALID_ARGUMENT for another
  // dtype or shape; FAILED_PRECONDITION if the step does not follow the
  // buffered ones of the same episode. The cell is copied if it has to wait
  // in the buffer; one that makes a chunk on its own (chunk length 1, no
  // delta encoding, numeric) is compressed from where it is. With
  // `segments` (the session of the server the chunks go to), such a chunk
  // of incompressible data from the session's min_chunk_bytes() on is built
  // in a shared-memory segment (built_chunk.h): its one copy.
  absl::StatusOr<std::shared_ptr<CellRef>> Append(
      const TensorView& cell, uint64_t episode_id, int32_t episode_step,
      const SharedMemoryClient* segments = nullptr);

  // As Append of each row of `rows` (rank >= 1), row t as step
  // `first_step + t`, in one call. Rows that fill a whole chunk are
  // compressed from where they are, without being buffered.
  absl::StatusOr<std::vector<std::shared_ptr<CellRef>>> AppendRows(
      const TensorView& rows, uint64_t episode_id, int32_t first_step,
      const SharedMemoryClient* segments = nullptr);

  // The error Append of a cell of `dtype` and `shape` would return,
  // without appending.
  absl::Status CanAppend(tensorflow::DataType dtype,
                         absl::Span<const int64_t> shape, uint64_t episode_id,
                         int32_t episode_step) const;

  // Finalizes the buffered rows as a (short) chunk.
  absl::Status Flush();

  // Drops the buffered rows and the refs kept alive.
  void Reset();

  // New options; the buffer must be empty (FAILED_PRECONDITION).
  absl::Status ApplyConfig(std::shared_ptr<ChunkerOptions> options);

  // Chunk keys of the refs kept alive (deduplicated).
  std::vector<uint64_t> GetKeepKeys() const;

  // The buffered data of `ref`; FAILED_PRECONDITION if it is not buffered.
  absl::StatusOr<Tensor> CopyDataForCell(const CellRef& ref) const;

  std::shared_ptr<ChunkerOptions> options() const;

 private:
  // Checks a cell of `dtype` and `shape` as step `episode_step`.
  absl::Status CanAppendLocked(tensorflow::DataType dtype,
                               absl::Span<const int64_t> shape,
                               uint64_t episode_id, int32_t episode_step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After CanAppendLocked: fixes the column's dtype and shape on its first
  // cell, and finalizes the buffer if it holds another episode.
  absl::Status StartCellLocked(tensorflow::DataType dtype,
                               absl::Span<const int64_t> shape,
                               uint64_t episode_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ref of the next buffered row, kept alive.
  std::shared_ptr<CellRef> NewRefLocked(uint64_t episode_id,
                                        int32_t episode_step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the buffered rows a chunk.
  absl::Status FinalizeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes a chunk of the rows of `buffer_refs_`, whose data `compress`
  // writes (`uncompressed_bytes` of it), and attaches it to the refs.
  absl::Status FinalizeRefsLocked(
      int64_t uncompressed_bytes, bool delta_encoded,
      absl::FunctionRef<absl::Status(tensorflow::TensorProto*)> compress)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The fields of the chunk of `buffer_refs_` but its tensor.
  void SetChunkFieldsLocked(int64_t uncompressed_bytes, bool delta_encoded,
                            ChunkData* chunk) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The chunk of `rows` (all of `buffer_refs_`) built in a segment of
  // `segments`; null if it is not one to build there, or could not be.
  std::shared_ptr<const ChunkData> BuildInSegmentLocked(
      const TensorView& rows, const SharedMemoryClient& segments) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Attaches `chunk`, the chunk of `buffer_refs_`, to them; the next rows
  // go to a new chunk.
  void AttachChunkLocked(std::shared_ptr<const ChunkData> chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int column_;
  mutable Mutex mu_;
  std::shared_ptr<ChunkerOptions> options_ ABSL_GUARDED_BY(mu_);
  std::optional<tensorflow::DataType> dtype_ ABSL_GUARDED_BY(mu_);
  // Shared by the column's refs.
  std::shared_ptr<const std::vector<int64_t>> shape_ ABSL_GUARDED_BY(mu_);
  // The buffered rows, stacked (a new Tensor when there are none), after
  // `headroom_` bytes of its buffer (CompressTensorAsProto).
  Tensor buffer_ ABSL_GUARDED_BY(mu_);
  size_t headroom_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<CellRef>> buffer_refs_ ABSL_GUARDED_BY(mu_);
  uint64_t next_chunk_key_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<CellRef>> active_refs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_CHUNKER_H_
