// NewArenaChunk: the ChunkData a writer fills with a chunk it makes.
//
// Its messages live on an arena that starts in a block of the chunk's own:
// a chunk of small steps takes one allocation instead of one per message
// and string (a chunk per step and column is common, and those allocations
// and frees were a third of a small-step writer's time). When the last
// reference goes, its large tensor contents go back to BufferPool for the
// next chunks' compressed bytes (which would otherwise be fresh, zero-filled
// buffers).
#ifndef REVERB_CC_CLIENT_ARENA_CHUNK_H_
#define REVERB_CC_CLIENT_ARENA_CHUNK_H_

#include <memory>

#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

REVERB_EXPORT std::shared_ptr<ChunkData> NewArenaChunk();

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_ARENA_CHUNK_H_
