#include "cc/insert_request.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cc/support/varint.h"
#include "grpcpp/support/slice.h"

namespace deepmind::reverb {
namespace {

// Field numbers of the length-delimited fields written here.
constexpr int kRequestChunks = 1;      // InsertStreamRequest.chunks
constexpr int kChunkData = 5;          // ChunkData.data
constexpr int kDataTensors = 1;        // ChunkData.Data.tensors
constexpr int kTensorContent = 4;      // TensorProto.tensor_content

size_t VarintSize(size_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

// Bytes of a length-delimited field whose payload has `size` bytes (all
// field numbers here take a one-byte tag).
size_t FieldSize(size_t size) { return 1 + VarintSize(size) + size; }

void PutFieldHeader(int field, size_t size, std::string* out) {
  out->push_back(static_cast<char>((field << 3) | 2));
  PutVarint32(static_cast<uint32_t>(size), out);
}

// Slices of the request under construction: serialized bytes gather in
// `pending` and become one slice (moved, not copied) when a borrowed
// tensor content or the end comes.
class Slices {
 public:
  std::string* pending() { return &pending_; }

  void Borrow(const std::string& content,
              const std::shared_ptr<const ChunkData>& chunk) {
    Flush();
    slices_.emplace_back(
        const_cast<char*>(content.data()), content.size(),
        [](void* owner) {
          delete static_cast<std::shared_ptr<const ChunkData>*>(owner);
        },
        new std::shared_ptr<const ChunkData>(chunk));
  }

  grpc::ByteBuffer Finish() {
    Flush();
    return grpc::ByteBuffer(slices_.data(), slices_.size());
  }

 private:
  void Flush() {
    if (pending_.empty()) return;
    auto* bytes = new std::string(std::move(pending_));
    pending_.clear();
    slices_.emplace_back(
        bytes->data(), bytes->size(),
        [](void* owner) { delete static_cast<std::string*>(owner); }, bytes);
  }

  std::string pending_;
  std::vector<grpc::Slice> slices_;
};

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
  const std::string& content = tensor.tensor_content();
  if (content.size() < kMinBorrowedBytes) return split;
  split.head.set_dtype(tensor.dtype());
  *split.head.mutable_tensor_shape() = tensor.tensor_shape();
  split.head.set_version_number(tensor.version_number());
  // Other fields set: serialize the tensor whole.
  split.borrowed =
      split.head.ByteSizeLong() + FieldSize(content.size()) == split.size;
  return split;
}

// The chunk as protobuf serializes it, copied into `out`.
void EncodeWhole(const ChunkData& chunk, std::string* out) {
  const size_t size = chunk.ByteSizeLong();
  PutFieldHeader(kRequestChunks, size, out);
  const size_t at = out->size();
  out->resize(at + size);
  chunk.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(out->data() + at));
}

void EncodeChunk(const std::shared_ptr<const ChunkData>& chunk,
                 Slices* slices) {
  std::string* out = slices->pending();  // Stays valid across Borrow.
  const auto& protos = chunk->data().tensors();
  if (std::none_of(protos.begin(), protos.end(), [](const auto& tensor) {
        return tensor.tensor_content().size() >= kMinBorrowedBytes;
      })) {
    return EncodeWhole(*chunk, out);  // Small chunks, the common case.
  }
  std::vector<SplitTensor> tensors;
  size_t data_size = 0;
  bool borrowed = false;
  for (const tensorflow::TensorProto& tensor : protos) {
    tensors.push_back(Split(tensor));
    data_size += FieldSize(tensors.back().size);
    borrowed |= tensors.back().borrowed;
  }
  if (!borrowed) return EncodeWhole(*chunk, out);
  ChunkData head;
  head.set_chunk_key(chunk->chunk_key());
  *head.mutable_sequence_range() = chunk->sequence_range();
  head.set_delta_encoded(chunk->delta_encoded());
  head.set_data_tensors_len(chunk->data_tensors_len());
  head.set_data_uncompressed_size(chunk->data_uncompressed_size());
  const size_t size = chunk->ByteSizeLong();
  // Fields this encoder does not know: serialize the chunk whole.
  if (head.ByteSizeLong() + FieldSize(data_size) != size) {
    return EncodeWhole(*chunk, out);
  }
  PutFieldHeader(kRequestChunks, size, out);
  head.AppendToString(out);
  PutFieldHeader(kChunkData, data_size, out);
  for (const SplitTensor& split : tensors) {
    PutFieldHeader(kDataTensors, split.size, out);
    if (!split.borrowed) {
      split.tensor->AppendToString(out);
      continue;
    }
    split.head.AppendToString(out);
    const std::string& content = split.tensor->tensor_content();
    PutFieldHeader(kTensorContent, content.size(), out);
    slices->Borrow(content, chunk);
  }
}

}  // namespace

grpc::ByteBuffer EncodeInsertRequest(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks) {
  Slices slices;
  for (const auto& chunk : chunks) EncodeChunk(chunk, &slices);
  request.AppendToString(slices.pending());
  return slices.Finish();
}

}  // namespace deepmind::reverb
