#include "cc/wire/chunk_encoding.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cc/core/chunk.h"
#include "cc/support/varint.h"

namespace deepmind::reverb {
namespace {

// A tensor with its content split off: `head` holds the other fields.
struct SplitTensor {
  const tensorflow::TensorProto* tensor;
  tensorflow::TensorProto head;  // Empty unless `borrowed`.
  bool borrowed = false;
  size_t size = 0;  // Bytes of the whole serialized TensorProto.
};

SplitTensor Split(const tensorflow::TensorProto& tensor) {
  SplitTensor split{&tensor};
  split.size = tensor.ByteSizeLong();
  if (tensor.tensor_content().size() < kMinBorrowedBytes) return split;
  split.borrowed = SplitTensorHead(tensor, split.size, &split.head);
  return split;
}

// Slices from this size on are referenced, not copied. Smaller ones may
// hold their bytes inline (in the grpc_slice itself).
constexpr size_t kMinReferencedSlice = 512;

// A tag and a varint32: 5 bytes each at most.
constexpr size_t kMaxFieldHeaderBytes = 10;

}  // namespace

absl::Cord ReceivedCord(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  absl::Cord cord;
  if (!buffer.Dump(&slices).ok()) return cord;
  for (grpc::Slice& slice : slices) {
    const absl::string_view bytes(reinterpret_cast<const char*>(slice.begin()),
                                  slice.size());
    if (bytes.size() < kMinReferencedSlice) {
      cord.Append(bytes);
    } else {
      cord.Append(
          absl::MakeCordFromExternal(bytes, [held = std::move(slice)]() {}));
    }
  }
  return cord;
}

size_t LengthDelimitedSize(size_t size) { return 1 + VarintSize(size) + size; }

bool SplitTensorHead(const tensorflow::TensorProto& tensor, size_t size,
                     tensorflow::TensorProto* head) {
  head->set_dtype(tensor.dtype());
  *head->mutable_tensor_shape() = tensor.tensor_shape();
  head->set_version_number(tensor.version_number());
  return head->ByteSizeLong() +
             LengthDelimitedSize(tensor.tensor_content().size()) ==
         size;
}

bool SplitChunkHead(const ChunkData& chunk, size_t size, size_t data_size,
                    ChunkData* head) {
  head->set_chunk_key(chunk.chunk_key());
  *head->mutable_sequence_range() = chunk.sequence_range();
  head->set_delta_encoded(chunk.delta_encoded());
  head->set_data_tensors_len(chunk.data_tensors_len());
  head->set_data_uncompressed_size(chunk.data_uncompressed_size());
  head->set_first_row(chunk.first_row());
  return head->ByteSizeLong() + LengthDelimitedSize(data_size) == size;
}

std::string ChunkBytesBeforeContent(const ChunkData& header,
                                    size_t content_size) {
  const tensorflow::TensorProto& tensor = header.data().tensors(0);
  const size_t tensor_size =
      tensor.ByteSizeLong() + LengthDelimitedSize(content_size);
  ChunkData head;
  SplitChunkHead(header, 0, 0, &head);
  WireBuffer wire;
  head.AppendToString(wire.pending());
  wire.PutFieldHeader(kChunkDataField, LengthDelimitedSize(tensor_size));
  wire.PutFieldHeader(kDataTensorsField, tensor_size);
  tensor.AppendToString(wire.pending());
  wire.PutFieldHeader(kTensorContentField, content_size);
  return std::move(*wire.pending());
}

void WireBuffer::Reserve(size_t n) {
  const size_t size = pending_.size();
  if (size + n <= pending_.capacity()) return;
  if (size >= kSliceBytes / 2) {
    Flush();
    pending_.reserve(std::max(n, kSliceBytes));
    return;
  }
  pending_.reserve(
      std::max(size + n, std::min(2 * pending_.capacity(), kSliceBytes)));
}

void WireBuffer::PutFieldHeader(int field, size_t size) {
  Reserve(kMaxFieldHeaderBytes);
  PutTag(field, kLengthDelimited, &pending_);
  PutVarint32(static_cast<uint32_t>(size), &pending_);
}

void WireBuffer::PutVarintField(int field, uint32_t value) {
  Reserve(kMaxFieldHeaderBytes);
  PutTag(field, kVarint, &pending_);
  PutVarint32(value, &pending_);
}

void WireBuffer::PutMessage(const google::protobuf::MessageLite& message,
                            size_t size) {
  Reserve(size);
  const size_t at = pending_.size();
  pending_.resize(at + size);
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(pending_.data() + at));
}

void WireBuffer::PutChunk(
    int field, const ChunkData& chunk, size_t size,
    absl::FunctionRef<std::shared_ptr<const void>()> owner) {
  auto whole = [&] {
    PutFieldHeader(field, size);
    PutMessage(chunk, size);
  };
  const auto& protos = chunk.data().tensors();
  if (std::none_of(protos.begin(), protos.end(), [](const auto& tensor) {
        return tensor.tensor_content().size() >= kMinBorrowedBytes;
      })) {
    return whole();  // Small chunks, the common case.
  }
  std::vector<SplitTensor> tensors;
  size_t data_size = 0;
  bool borrowed = false;
  for (const tensorflow::TensorProto& tensor : protos) {
    tensors.push_back(Split(tensor));
    data_size += LengthDelimitedSize(tensors.back().size);
    borrowed |= tensors.back().borrowed;
  }
  if (!borrowed) return whole();
  ChunkData head;
  // Fields this encoder does not know: serialize the chunk whole.
  if (!SplitChunkHead(chunk, size, data_size, &head)) return whole();
  PutFieldHeader(field, size);
  head.AppendToString(&pending_);
  PutFieldHeader(kChunkDataField, data_size);
  for (const SplitTensor& split : tensors) {
    PutFieldHeader(kDataTensorsField, split.size);
    if (!split.borrowed) {
      split.tensor->AppendToString(&pending_);
      continue;
    }
    split.head.AppendToString(&pending_);
    const std::string& content = split.tensor->tensor_content();
    PutFieldHeader(kTensorContentField, content.size());
    Borrow(content, owner());
  }
}

void WireBuffer::PutBytes(
    int field, const absl::Cord& bytes,
    absl::FunctionRef<std::shared_ptr<const void>()> owner) {
  PutFieldHeader(field, bytes.size());
  for (absl::string_view piece : bytes.Chunks()) {
    if (piece.size() < kMinBorrowedBytes) {
      Reserve(piece.size());
      pending_.append(piece.data(), piece.size());
    } else {
      Borrow(piece, owner());
    }
  }
}

void WireBuffer::Borrow(absl::string_view content,
                        std::shared_ptr<const void> owner) {
  Flush();
  slices_.emplace_back(
      const_cast<char*>(content.data()), content.size(),
      [](void* held) {
        delete static_cast<std::shared_ptr<const void>*>(held);
      },
      new std::shared_ptr<const void>(std::move(owner)));
}

void WireBuffer::Flush() {
  if (pending_.empty()) return;
  auto* bytes = new std::string(std::move(pending_));
  pending_.clear();
  slices_.emplace_back(
      bytes->data(), bytes->size(),
      [](void* owner) { delete static_cast<std::string*>(owner); }, bytes);
}

grpc::ByteBuffer WireBuffer::Finish() {
  Flush();
  grpc::ByteBuffer buffer(slices_.data(), slices_.size());
  slices_.clear();
  return buffer;
}

}  // namespace deepmind::reverb
