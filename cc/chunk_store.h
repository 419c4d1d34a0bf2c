// Chunks: the shared, immutable blocks of tensor data that items point at.
//
// A Chunk holds one serialized ChunkData (its "wire" bytes) and the few
// fields the server reads. Items (in any number of tables), insert streams
// and in-flight samples hold it through std::shared_ptr; the memory is freed
// when the last holder lets go.
//
// The server never looks inside tensors, so it keeps chunks as bytes: a
// chunk received by gRPC is parsed only for its header and kept in the
// memory it arrived in (large ones) or one copy (small ones), and is sent to
// samplers as those bytes again. Protobuf would copy every tensor on parsing
// and walk every chunk again to serialize it.
//
// ChunkStore deduplicates chunks by key without owning them: it maps keys to
// weak pointers, so a chunk that nobody holds any more is gone from the store
// too. Thread-safe.
#ifndef REVERB_CC_CHUNK_STORE_H_
#define REVERB_CC_CHUNK_STORE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// Field numbers on the path from a ChunkData to its tensors' bytes, for the
// code that reads or writes chunk wire bytes itself (Chunk::Parse,
// chunk_encoding.h).
inline constexpr int kChunkDataField = 5;      // ChunkData.data
inline constexpr int kDataTensorsField = 1;    // ChunkData.Data.tensors
inline constexpr int kTensorContentField = 4;  // TensorProto.tensor_content

class REVERB_EXPORT Chunk {
 public:
  // The chunk serialized as `data`.
  explicit Chunk(const ChunkData& data);

  // The chunk whose serialized ChunkData is `wire`, kept as it is.
  // INVALID_ARGUMENT if `wire` does not parse as a ChunkData. Tensor contents
  // are not parsed (they are bytes to the server); every other field is.
  static absl::StatusOr<std::shared_ptr<Chunk>> Parse(absl::Cord wire);

  uint64_t key() const { return key_; }
  // The serialized ChunkData.
  const absl::Cord& wire() const { return wire_; }
  // Size of the serialized chunk.
  size_t DataByteSizeLong() const { return wire_.size(); }
  // The chunk parsed (a copy of its data).
  ChunkData ToProto() const;
  // Uncompressed size of the tensors (at least 1).
  int64_t uncompressed_data_size() const { return uncompressed_size_; }
  uint64_t episode_id() const { return episode_id_; }
  // Rows (steps) in the chunk: end - start + 1 of its sequence range.
  int32_t num_rows() const { return num_rows_; }
  // Tensors (columns) in the chunk.
  int32_t num_columns() const { return num_columns_; }

 private:
  // `header`: the chunk without its data; `num_tensors` in its data.
  Chunk(absl::Cord wire, const ChunkData& header, int num_tensors);

  const absl::Cord wire_;
  uint64_t key_;
  uint64_t episode_id_;
  int32_t num_rows_;
  int32_t num_columns_;
  int64_t uncompressed_size_;
};

class REVERB_EXPORT ChunkStore {
 public:
  // Returns the live chunk with the key of `data` if there is one (dropping
  // `data`), else a new chunk made from `data`.
  std::shared_ptr<Chunk> Insert(const ChunkData& data) ABSL_LOCKS_EXCLUDED(mu_);

  // Looks up `keys` in order. NOT_FOUND naming the first key that has no live
  // chunk.
  absl::Status Get(absl::Span<const uint64_t> keys,
                   std::vector<std::shared_ptr<Chunk>>* chunks)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Number of keys whose chunk is still alive.
  size_t num_live_chunks() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Drops entries of dead chunks once the map has doubled since the last
  // sweep, so the map stays proportional to the live chunks.
  void MaybeSweep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::weak_ptr<Chunk>> chunks_
      ABSL_GUARDED_BY(mu_);
  size_t sweep_threshold_ ABSL_GUARDED_BY(mu_) = 1024;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CHUNK_STORE_H_
