// A serialized ChunkData read without copying its tensors' contents: the
// chunk's other fields parsed into a ChunkData, each tensor's
// `tensor_content` left out of it and pointed at where it lies instead.
//
// A sampler reads a chunk a server lent it in shared memory this way
// (cc/client/shared_memory_client.h): the contents are decompressed from the
// mapped segment straight into the sample's tensors, with no protobuf copy
// in between (DecompressTensorFromProto(proto, content)).
#ifndef REVERB_CC_WIRE_CHUNK_VIEWS_H_
#define REVERB_CC_WIRE_CHUNK_VIEWS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// Parses `bytes` (a flat Cord: one piece) into `header` (which may live on
// an arena) with no tensor content, and sets `contents` to the contents of
// its tensors, in order (empty for a tensor without one), as views into
// `bytes`. INVALID_ARGUMENT if `bytes` do not parse as a ChunkData.
REVERB_EXPORT absl::Status ParseChunkViews(
    const absl::Cord& bytes, ChunkData* header,
    std::vector<absl::string_view>* contents);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_WIRE_CHUNK_VIEWS_H_
