// Wire bytes of messages that carry chunks, without copying large tensors.
//
// gRPC serializes a protobuf message into one fresh buffer, copying every
// chunk's tensor bytes into it. For large steps that copy, and the page
// faults of a fresh buffer that size, cost as much as the rest of the work.
// WireBuffer builds a message's wire bytes as a grpc::ByteBuffer of slices
// instead: protobuf serializes everything but tensor contents of
// kMinBorrowedBytes or more, and those are slices that refer to the chunk's
// own bytes and hold the chunk until gRPC has sent them.
//
// A chunk written this way parses as the same ChunkData but its bytes need
// not equal protobuf's serialization: a chunk's `data` and a tensor's
// `tensor_content` come after the message's other fields, which the wire
// format allows. Chunks or tensors with fields this encoder does not know
// are serialized whole by protobuf.
#ifndef REVERB_CC_WIRE_CHUNK_ENCODING_H_
#define REVERB_CC_WIRE_CHUNK_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "cc/support/export.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// Tensor contents from this size on are sent from the chunk, not copied.
inline constexpr size_t kMinBorrowedBytes = 16 << 10;

// Bytes of a length-delimited field with a payload of `size` bytes (field
// numbers below 16, whose tag is one byte).
REVERB_EXPORT size_t LengthDelimitedSize(size_t size);

// The bytes of `buffer` (a message as gRPC received it), sharing the slices
// gRPC holds them in; slices under 512 bytes, which may hold their bytes
// inline, are copied. Empty if the buffer cannot be read.
REVERB_EXPORT absl::Cord ReceivedCord(const grpc::ByteBuffer& buffer);

// The fields of `tensor` (whose ByteSizeLong() is `size`) but its content,
// into `head` (empty); false if it has fields this encoding does not know
// (it is then serialized whole).
REVERB_EXPORT bool SplitTensorHead(const tensorflow::TensorProto& tensor,
                                   size_t size, tensorflow::TensorProto* head);

// The fields of `chunk` (whose ByteSizeLong() is `size`, its data's
// `data_size`) but its data, into `head` (empty); false if it has fields
// this encoding does not know.
REVERB_EXPORT bool SplitChunkHead(const ChunkData& chunk, size_t size,
                                  size_t data_size, ChunkData* head);

// The wire bytes of `header`, a chunk of one tensor without its content, up
// to where a content of `content_size` (> 0) bytes goes: with the content after
// them, they are the chunk's bytes (as PutChunk lays them out, the content
// last), which a writer can build in place (shared_memory_client.h).
REVERB_EXPORT std::string ChunkBytesBeforeContent(const ChunkData& header,
                                                  size_t content_size);

class REVERB_EXPORT WireBuffer {
 public:
  // Pending bytes become a slice of their own (moved, not copied) from
  // about this size on, instead of growing further.
  static constexpr size_t kSliceBytes = 64 << 10;

  // Serialized bytes go here; they become one slice (moved, not copied)
  // when a borrowed tensor content or the end comes, or when Reserve makes
  // room. A caller appending more than a few bytes reserves them first.
  std::string* pending() { return &pending_; }

  // Makes room for `n` more bytes in pending(): once pending bytes would
  // have to grow from kSliceBytes / 2 or more, they become a slice and a new
  // buffer of kSliceBytes (or `n`) starts, so that a large message is not
  // copied again and again to grow. The Put* below reserve what they
  // append, but for the few header bytes of a chunk whose contents are
  // borrowed.
  void Reserve(size_t n);

  // The tag and length of length-delimited field `field` (any number).
  void PutFieldHeader(int field, size_t size);

  // Varint field `field` (below 16) of `value`.
  void PutVarintField(int field, uint32_t value);

  // The bytes of `message` (no header), whose ByteSizeLong() is `size`: it
  // must have been computed on the message as it is.
  void PutMessage(const google::protobuf::MessageLite& message, size_t size);

  // Field `field` holding `chunk`, whose ByteSizeLong() is `size`: it must
  // have been computed on the chunk as it is (its cached sizes are used).
  // `owner` is called if a tensor content is borrowed: the slice holds what
  // it returns (which keeps `chunk` alive) until gRPC has sent it.
  void PutChunk(int field, const ChunkData& chunk, size_t size,
                absl::FunctionRef<std::shared_ptr<const void>()> owner);

  // Field `field` holding `bytes` (a chunk's wire bytes). Pieces of
  // kMinBorrowedBytes or more are borrowed, as PutChunk's contents.
  void PutBytes(int field, const absl::Cord& bytes,
                absl::FunctionRef<std::shared_ptr<const void>()> owner);

  // The bytes so far; the buffer is empty afterwards.
  grpc::ByteBuffer Finish();

 private:
  void Borrow(absl::string_view content, std::shared_ptr<const void> owner);
  void Flush();

  std::string pending_;
  std::vector<grpc::Slice> slices_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_WIRE_CHUNK_ENCODING_H_
