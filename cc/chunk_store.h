// Chunks: the shared, immutable blocks of tensor data that items point at.
//
// A Chunk wraps one ChunkData proto. Items (in any number of tables), insert
// streams and in-flight samples hold it through std::shared_ptr; the memory
// is freed when the last holder lets go.
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
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT Chunk {
 public:
  explicit Chunk(ChunkData data);

  uint64_t key() const { return data_.chunk_key(); }
  const ChunkData& data() const { return data_; }
  // Serialized size of the chunk, computed once.
  size_t DataByteSizeLong() const { return byte_size_; }
  // Uncompressed size of the tensors (at least 1).
  int64_t uncompressed_data_size() const;
  uint64_t episode_id() const { return data_.sequence_range().episode_id(); }
  // Rows (steps) in the chunk: end - start + 1.
  int32_t num_rows() const;
  // Tensors (columns) in the chunk.
  int32_t num_columns() const;

 private:
  const ChunkData data_;
  const size_t byte_size_;
};

class REVERB_EXPORT ChunkStore {
 public:
  // Returns the live chunk with the key of `data` if there is one (dropping
  // `data`), else a new chunk made from `data`.
  std::shared_ptr<Chunk> Insert(ChunkData data) ABSL_LOCKS_EXCLUDED(mu_);

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
