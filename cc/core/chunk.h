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
// A chunk a writer in the server's process hands over (the in-process path,
// cc/core/local_table.h) is kept as the writer's ChunkData, shared, not
// copied: samplers in the process read it as it is, gRPC responses borrow
// its tensor contents (WireBuffer::PutChunk) and a checkpoint serializes it.
// Exactly one of wire() and proto() holds the chunk.
//
// A chunk a client on the server's host sent as a shared-memory segment
// (cc/service/shared_memory_host.h) is kept as bytes mapped from that
// segment: wire() is the mapping, segment() names the file, and samplers on
// the host are given the file instead of the bytes.
#ifndef REVERB_CC_CORE_CHUNK_H_
#define REVERB_CC_CORE_CHUNK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

// The fields of `wire`, a serialized ChunkData, but its tensors' contents,
// parsed into `header` (which may live on an arena), and those contents, in
// tensor order (empty for a tensor without one), sharing `wire`'s memory.
// INVALID_ARGUMENT "Chunk does not parse as a ChunkData: ..." otherwise.
// How the server reads a chunk (Chunk::Parse), and how a sampler reads one
// in shared memory without copying its contents
// (cc/client/shared_memory_client.h).
REVERB_EXPORT absl::Status ParseChunkHeader(const absl::Cord& wire,
                                            ChunkData* header,
                                            std::vector<absl::Cord>* contents);

class REVERB_EXPORT Chunk {
 public:
  // The chunk serialized as `data`.
  explicit Chunk(const ChunkData& data);

  // The chunk kept as `data` itself (not null; never modified again).
  static std::shared_ptr<Chunk> Share(std::shared_ptr<const ChunkData> data);

  // The chunk whose serialized ChunkData is `wire`, kept as it is.
  // INVALID_ARGUMENT if `wire` does not parse as a ChunkData. Tensor contents
  // are not parsed (they are bytes to the server); every other field is. A
  // chunk of the form writers send (its key, range, sizes, and tensors of a
  // dtype, a shape of sizes and a content) is read in place, without
  // protobuf or allocations; any other by ParseChunkHeader.
  // `segment`: the shared-memory segment (cc/support/shm_segment.h) `wire`
  // is mapped from, if it is.
  static absl::StatusOr<std::shared_ptr<Chunk>> Parse(absl::Cord wire,
                                                      std::string segment = "");
  // Whether Parse reads `wire` in place (it has the form writers send).
  static bool ParsesInPlace(const absl::Cord& wire) {
    return Scan(wire).has_value();
  }

  uint64_t key() const { return key_; }
  // The serialized ChunkData; empty for a chunk kept as a proto.
  const absl::Cord& wire() const { return wire_; }
  // The name of the shared-memory segment holding wire(); empty if none.
  const std::string& segment() const { return segment_; }
  // The ChunkData of a chunk made by Share(); null for one kept as bytes.
  const std::shared_ptr<const ChunkData>& proto() const { return proto_; }
  // Size of the serialized chunk.
  size_t DataByteSizeLong() const { return size_; }
  // The serialized ChunkData: wire(), or proto() serialized (a copy).
  std::string Serialize() const;
  // The chunk parsed (a copy of its data).
  ChunkData ToProto() const;
  // proto(), or else the bytes parsed into a new ChunkData.
  std::shared_ptr<const ChunkData> SharedProto() const;
  // Uncompressed size of the tensors (at least 1).
  int64_t uncompressed_data_size() const { return uncompressed_size_; }
  uint64_t episode_id() const { return episode_id_; }
  // Rows (steps) in the chunk: end - start + 1 of its sequence range.
  int32_t num_rows() const { return num_rows_; }
  // Tensors (columns) in the chunk.
  int32_t num_columns() const { return num_columns_; }

 private:
  // What a chunk keeps of its header: its fields, and the tensors in its
  // data (for num_columns() where data_tensors_len is not set).
  struct Header {
    uint64_t key = 0;
    uint64_t episode_id = 0;
    int32_t start = 0;
    int32_t end = 0;
    int32_t data_tensors_len = 0;
    int64_t data_uncompressed_size = 0;
    int num_tensors = 0;
  };
  // `header` as Chunk keeps it; `num_tensors` in its data.
  static Header Summarize(const ChunkData& header, int num_tensors);
  // The header of `wire` when it has the form writers send (and protobuf
  // would parse it the same); nullopt for any other, valid or not.
  static std::optional<Header> Scan(const absl::Cord& wire);

  // `wire` is the chunk serialized, or empty if `proto` holds it.
  Chunk(absl::Cord wire, std::shared_ptr<const ChunkData> proto,
        const Header& header);

  const absl::Cord wire_;
  std::string segment_;
  const std::shared_ptr<const ChunkData> proto_;
  size_t size_;
  uint64_t key_;
  uint64_t episode_id_;
  int32_t num_rows_;
  int32_t num_columns_;
  int64_t uncompressed_size_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_CHUNK_H_
