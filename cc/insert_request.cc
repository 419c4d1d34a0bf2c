#include "cc/insert_request.h"

#include "cc/chunk_encoding.h"

namespace deepmind::reverb {
namespace {

constexpr int kRequestChunks = 1;  // InsertStreamRequest.chunks

}  // namespace

grpc::ByteBuffer EncodeInsertRequest(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks) {
  WireBuffer wire;
  for (const auto& chunk : chunks) {
    wire.PutChunk(kRequestChunks, *chunk, chunk->ByteSizeLong(),
                  [&chunk]() -> std::shared_ptr<const void> { return chunk; });
  }
  request.AppendToString(wire.pending());
  return wire.Finish();
}

}  // namespace deepmind::reverb
