#include "cc/client/arena_chunk.h"

#include <utility>

#include "cc/support/buffer_pool.h"
#include "google/protobuf/arena.h"

namespace deepmind::reverb {
namespace {

struct ArenaChunk {
  static constexpr size_t kBlockBytes = 1024;

  static google::protobuf::ArenaOptions Options(char* block) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = kBlockBytes;
    return options;
  }

  ArenaChunk() : arena(Options(block)) {}
  ~ArenaChunk() {
    for (auto& tensor : *data->mutable_data()->mutable_tensors()) {
      BufferPool::Default().Give(std::move(*tensor.mutable_tensor_content()));
    }
  }

  alignas(16) char block[kBlockBytes];
  google::protobuf::Arena arena;
  ChunkData* const data =
      google::protobuf::Arena::CreateMessage<ChunkData>(&arena);
};

}  // namespace

std::shared_ptr<ChunkData> NewArenaChunk() {
  auto holder = std::make_shared<ArenaChunk>();
  return std::shared_ptr<ChunkData>(holder, holder->data);
}

}  // namespace deepmind::reverb
