// Serialization of the writers' InsertStreamRequests without copying chunk
// tensors (see chunk_encoding.h).
#ifndef REVERB_CC_INSERT_REQUEST_H_
#define REVERB_CC_INSERT_REQUEST_H_

#include <cstddef>
#include <memory>

#include "absl/types/span.h"
#include "cc/chunk_encoding.h"
#include "cc/support/export.h"
#include "grpcpp/support/byte_buffer.h"
#include "reverb/cc/reverb_service.pb.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// The wire bytes of `request` with `chunks` as its `chunks` field (in
// order, before the request's own fields). `request` must have no chunks of
// its own.
REVERB_EXPORT grpc::ByteBuffer EncodeInsertRequest(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_INSERT_REQUEST_H_
