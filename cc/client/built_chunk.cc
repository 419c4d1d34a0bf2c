#include "cc/client/built_chunk.h"

#include <utility>

namespace deepmind::reverb {
namespace {

// Owns the BuiltChunk whose header a shared_ptr points to; found again
// with std::get_deleter.
struct BuiltChunkDeleter {
  BuiltChunk* built;
  void operator()(const ChunkData*) const { delete built; }
};

}  // namespace

std::shared_ptr<const ChunkData> MakeBuiltChunk(
    std::unique_ptr<BuiltChunk> built) {
  BuiltChunk* owned = built.release();
  return std::shared_ptr<const ChunkData>(&owned->header,
                                          BuiltChunkDeleter{owned});
}

const BuiltChunk* FindBuiltChunk(
    const std::shared_ptr<const ChunkData>& chunk) {
  const auto* deleter = std::get_deleter<BuiltChunkDeleter>(chunk);
  return deleter == nullptr ? nullptr : deleter->built;
}

size_t ChunkWireSize(const std::shared_ptr<const ChunkData>& chunk) {
  if (const BuiltChunk* built = FindBuiltChunk(chunk)) {
    return built->bytes.size();
  }
  const int cached = chunk->GetCachedSize();
  return cached > 0 ? static_cast<size_t>(cached) : chunk->ByteSizeLong();
}

absl::StatusOr<std::shared_ptr<const ChunkData>> WholeChunk(
    std::shared_ptr<const ChunkData> chunk) {
  const BuiltChunk* built = FindBuiltChunk(chunk);
  if (built == nullptr) return chunk;
  auto whole = std::make_shared<ChunkData>();
  if (!whole->ParseFromString(std::string(built->bytes))) {
    return absl::InternalError("A chunk built in shared memory is damaged.");
  }
  return whole;
}

}  // namespace deepmind::reverb
