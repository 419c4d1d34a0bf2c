// BuiltChunk: a writer's chunk whose wire bytes were built in place, in a
// shared-memory segment of the server's host (SharedMemoryClient::
// BuildChunk), instead of its content being copied into the chunk's proto
// and then into a segment: a large step is copied once, from the caller's
// array into the memory the server keeps.
//
// Writers hold chunks as std::shared_ptr<const ChunkData>. A built chunk is
// one too: its proto holds every field but its tensor's content, which
// lies in `bytes` (and only there). So what reads a writer's chunks takes
// its size from ChunkWireSize, its wire bytes from FindBuiltChunk where
// there is one, and its content from WholeChunk.
#ifndef REVERB_CC_CLIENT_BUILT_CHUNK_H_
#define REVERB_CC_CLIENT_BUILT_CHUNK_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

struct REVERB_EXPORT BuiltChunk {
  ChunkData header;     // The chunk without its tensor's content.
  absl::Cord bytes;     // The chunk's wire bytes (a mapping of the segment).
  std::string segment;  // The segment's name.
  std::string prefix;   // The name prefix of the server it was built for.
  // The segment was handed to a server (it can be handed over once).
  mutable std::atomic<bool> sent{false};
};

// The chunk that `built` is.
REVERB_EXPORT std::shared_ptr<const ChunkData> MakeBuiltChunk(
    std::unique_ptr<BuiltChunk> built);

// The BuiltChunk `chunk` is, or null.
REVERB_EXPORT const BuiltChunk* FindBuiltChunk(
    const std::shared_ptr<const ChunkData>& chunk);

// The size of `chunk`'s wire bytes: a built chunk's bytes, else its size
// as last computed (writers size a chunk once, when they make it: it does
// not change), or ByteSizeLong() if it never was.
REVERB_EXPORT size_t
ChunkWireSize(const std::shared_ptr<const ChunkData>& chunk);

// `chunk` with its content: `chunk` itself, or a built chunk's bytes
// parsed (a copy). INTERNAL if they do not parse.
REVERB_EXPORT absl::StatusOr<std::shared_ptr<const ChunkData>> WholeChunk(
    std::shared_ptr<const ChunkData> chunk);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_BUILT_CHUNK_H_
