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
#ifndef REVERB_CC_CORE_CHUNK_H_
#define REVERB_CC_CORE_CHUNK_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
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

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_CHUNK_H_
