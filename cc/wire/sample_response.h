// The wire bytes of SampleStreamResponses: how the server writes samples.
//
// The server encodes responses itself instead of filling SampleStreamResponse
// protos for gRPC to serialize:
//  - chunks are written as the bytes they are stored as (protobuf would size
//    and serialize every chunk again for every response); pieces of
//    kMinBorrowedBytes or more are borrowed, not copied (see
//    chunk_encoding.h);
//  - an entry's SampleInfo holds the stored item's bytes as the table
//    serialized them when it stored the item (TableItem::encoded_item),
//    followed by its current `priority` and `times_sampled`: of a scalar
//    field given twice, a parser keeps the last. This spares a
//    serialization of the item per sample.
// Any protobuf parser reads the bytes as the same response
// (docs/wire-protocol.md, "SampleStream").
//
// Our clients read them with DecodeSampleResponse, which leaves the tensor
// contents of large chunks in gRPC's receive buffers (in pieces: gRPC
// receives into buffers of 64 KiB) instead of copying each into a string
// of its own, and its fresh pages, before it is copied again into a sample.
#ifndef REVERB_CC_WIRE_SAMPLE_RESPONSE_H_
#define REVERB_CC_WIRE_SAMPLE_RESPONSE_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/types/span.h"
#include "cc/core/chunk.h"
#include "cc/core/table_item.h"
#include "cc/support/export.h"
#include "cc/wire/chunk_encoding.h"
#include "grpcpp/support/byte_buffer.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {

// A response under construction, then (`bytes`) while it is written.
struct SampleResponseBytes {
  WireBuffer wire;
  grpc::ByteBuffer bytes;
  // What AppendSample put in it: infos and chunks (a lent chunk counts as
  // its size: the link holds that much until the client takes it).
  int64_t size = 0;
};

// The SampleInfo of `sample`, as wire bytes (its item's encoded_item must be
// set, as a table sets it when it stores an item).
REVERB_EXPORT std::string EncodeSampleInfo(const SampledItem& sample);

// Appends `sample` to `responses` as SampleEntries: the first carries its
// info, the last has end_of_sequence. A new response is started first if
// there is none or the last one's `size` has reached `max_response_bytes`,
// and again before a chunk once it has: a large
// sample spans entries of several responses. A chunk is never split.
// A chunk kept in a shared-memory segment goes as the segment `lend` names
// for it (SampleEntry.shared_data), unless that is empty (then as bytes).
// With `trim_chunks` (the stream asked for it), a chunk sent as bytes is
// sent as the rows the sample reads where TrimChunk can (chunk_rows.h).
REVERB_EXPORT void AppendSample(
    const SampledItem& sample, int64_t max_response_bytes,
    std::deque<SampleResponseBytes>* responses,
    absl::FunctionRef<std::string(const Chunk&)> lend =
        [](const Chunk&) { return std::string(); },
    bool trim_chunks = false);

// AppendSample of each of `samples`, in order. The items and chunks of a
// large table's samples lie anywhere in memory, and each read of them
// would wait for it: a few samples ahead of the one being written, each
// sample's are fetched, link after link (its item, the item's encoded bytes
// and chunk list, its first chunk).
REVERB_EXPORT void AppendSamples(
    absl::Span<const SampledItem> samples, int64_t max_response_bytes,
    std::deque<SampleResponseBytes>* responses,
    absl::FunctionRef<std::string(const Chunk&)> lend, bool trim_chunks);

// A SampleStreamResponse naming `segment`, whose first `size` bytes hold a
// response's entries (`shared_response`: a segment the server lends,
// docs/wire-protocol.md, "Shared memory").
REVERB_EXPORT grpc::ByteBuffer SharedResponseBytes(std::string segment,
                                                   size_t size);

// Parses `bytes`, a SampleStreamResponse as gRPC received it, into
// `response` (empty; it may live on an arena) as protobuf would (protobuf
// parses a response without entries of kMinBorrowedBytes or more), but
// for the chunks of kMinBorrowedBytes or more: each is parsed by
// ParseChunkHeader (cc/core/chunk.h), its tensors without their contents,
// and `apart` gets it with the contents, which share `bytes`' memory.
// Fields a SampleStreamResponse does not have may be dropped. INVALID_ARGUMENT
// "Malformed SampleStreamResponse." if the bytes do not parse.
REVERB_EXPORT absl::Status DecodeSampleResponse(
    const grpc::ByteBuffer& bytes, SampleStreamResponse* response,
    absl::FunctionRef<void(const ChunkData* chunk,
                           std::vector<absl::Cord> contents)>
        apart);

// The same of a response's bytes in a cord (a segment's, mapped): the
// contents `apart` gets share the cord's memory.
REVERB_EXPORT absl::Status DecodeSampleResponse(
    const absl::Cord& wire, SampleStreamResponse* response,
    absl::FunctionRef<void(const ChunkData* chunk,
                           std::vector<absl::Cord> contents)>
        apart);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_WIRE_SAMPLE_RESPONSE_H_
