#include "cc/wire/chunk_views.h"

#include <string>

#include "cc/core/chunk.h"
#include "cc/support/quiet_parse.h"
#include "cc/support/wire_reader.h"

namespace deepmind::reverb {
namespace {

absl::Status NotAChunk() {
  return absl::InvalidArgumentError("Chunk does not parse as a ChunkData.");
}

// Splits `tensor` (a serialized TensorProto) into its fields but the
// content (`head`) and its content, a view of `tensor`'s memory.
bool SplitTensor(const absl::Cord& tensor, std::string* head,
                 absl::string_view* content) {
  WireReader reader(tensor);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return false;
    if (field == kTensorContentField && type == kLengthDelimited) {
      absl::Cord value;
      if (!reader.ReadLengthDelimited(&value)) return false;
      const absl::optional<absl::string_view> flat = value.TryFlat();
      if (!flat.has_value()) return false;
      *content = *flat;  // The last one wins, as for protobuf.
    } else if (!reader.CopyField(field, type, head)) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ParseChunkViews(const absl::Cord& bytes, ChunkData* header,
                             std::vector<absl::string_view>* contents) {
  contents->clear();
  std::string head;
  std::vector<std::string> tensor_heads;
  WireReader reader(bytes);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return NotAChunk();
    if (field != kChunkDataField || type != kLengthDelimited) {
      if (!reader.CopyField(field, type, &head)) return NotAChunk();
      continue;
    }
    absl::Cord data;
    if (!reader.ReadLengthDelimited(&data)) return NotAChunk();
    WireReader tensors(data);
    while (!tensors.done()) {
      if (!tensors.ReadTag(&field, &type)) return NotAChunk();
      if (field != kDataTensorsField || type != kLengthDelimited) {
        if (!tensors.Skip(type)) return NotAChunk();
        continue;
      }
      absl::Cord tensor;
      if (!tensors.ReadLengthDelimited(&tensor) ||
          !SplitTensor(tensor, &tensor_heads.emplace_back(),
                       &contents->emplace_back())) {
        return NotAChunk();
      }
    }
  }
  if (!ParseQuietly(head, header)) return NotAChunk();
  for (const std::string& tensor : tensor_heads) {
    if (!ParseQuietly(tensor, header->mutable_data()->add_tensors())) {
      return NotAChunk();
    }
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
