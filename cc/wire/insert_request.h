// InsertStreamRequests on the wire without copying chunk tensors: the
// writers' encoding (see chunk_encoding.h) and the server's decoding (see
// Chunk::Parse in cc/core/chunk.h).
#ifndef REVERB_CC_WIRE_INSERT_REQUEST_H_
#define REVERB_CC_WIRE_INSERT_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "cc/wire/chunk_encoding.h"
#include "grpcpp/support/byte_buffer.h"
#include "reverb/cc/reverb_service.pb.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

class Chunk;  // cc/core/chunk.h: the server's side needs it, writers do not.

// The wire bytes of `request` with `chunks`, then the chunks whose wire
// bytes `chunk_bytes` are, as its `chunks` field (in order, before the
// request's own fields) and `shared_chunks` as its `shared_chunks` (after
// them). `request` must have neither of its own.
REVERB_EXPORT grpc::ByteBuffer EncodeInsertRequest(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks,
    absl::Span<const SharedMemoryChunk> shared_chunks = {},
    absl::Span<const absl::Cord> chunk_bytes = {});

// An InsertStreamRequest as the server reads it.
struct DecodedInsertRequest {
  std::vector<std::shared_ptr<Chunk>> chunks;
  std::vector<PrioritizedItem> items;
  std::vector<uint64_t> keep_chunk_keys;
  // Chunks sent as shared-memory segments, for the server to take
  // (cc/service/shared_memory_host.h).
  std::vector<SharedMemoryChunk> shared_chunks;
};

// Parses `bytes`, a serialized InsertStreamRequest, into `request` (whose
// contents are replaced). Chunks of kMinBorrowedBytes or more keep gRPC's
// memory; smaller ones are copied, so that they do not hold on to receive
// buffers larger than themselves. INVALID_ARGUMENT if `bytes` do not parse.
REVERB_EXPORT absl::Status DecodeInsertRequest(const grpc::ByteBuffer& bytes,
                                               DecodedInsertRequest* request);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_WIRE_INSERT_REQUEST_H_
