// Serialization of the writers' InsertStreamRequests without copying chunk
// tensors.
//
// gRPC serializes a protobuf request into one fresh buffer, copying every
// chunk's tensor bytes into it. For large steps that copy, and the page
// faults of a fresh buffer that size, cost the writer as much as the rest
// of its work: with 1 MiB steps, over half of the writer's page faults were
// in that buffer. EncodeInsertRequest produces the request's wire bytes as a
// grpc::ByteBuffer of slices instead: protobuf serializes everything but
// tensor contents of kMinBorrowedBytes or more, and those are slices that
// refer to the chunk's own bytes and hold the chunk until gRPC has sent
// them.
//
// The bytes parse as the same InsertStreamRequest (a test checks it) but
// need not equal protobuf's serialization: a chunk's `data` and a tensor's
// `tensor_content` come after the message's other fields, which the wire
// format allows. Chunks or tensors with fields this encoder does not know
// are serialized whole by protobuf.
#ifndef REVERB_CC_INSERT_REQUEST_H_
#define REVERB_CC_INSERT_REQUEST_H_

#include <cstddef>
#include <memory>

#include "absl/types/span.h"
#include "cc/support/export.h"
#include "grpcpp/support/byte_buffer.h"
#include "reverb/cc/reverb_service.pb.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// Tensor contents from this size on are sent from the chunk, not copied.
inline constexpr size_t kMinBorrowedBytes = 16 << 10;

// The wire bytes of `request` with `chunks` as its `chunks` field (in
// order, before the request's own fields). `request` must have no chunks of
// its own.
REVERB_EXPORT grpc::ByteBuffer EncodeInsertRequest(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_INSERT_REQUEST_H_
