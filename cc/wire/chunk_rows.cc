#include "cc/wire/chunk_rows.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cc/support/varint.h"
#include "cc/tensor/compression.h"
#include "cc/tensor/snappy_decode.h"
#include "cc/tensor/tensor.h"
#include "cc/wire/chunk_encoding.h"

namespace deepmind::reverb {
namespace {

// Tag and length of a length-delimited field.
std::string FieldHeader(int field, size_t size) {
  std::string out;
  PutTag(field, kLengthDelimited, &out);
  PutVarint64(size, &out);
  return out;
}

// The fields of `chunk` but its tensors' contents into `header`, and those
// contents (sharing the chunk's memory) into `contents`; false if the
// chunk has fields this does not know.
bool SplitChunk(const Chunk& chunk, ChunkData* header,
                std::vector<absl::Cord>* contents) {
  if (chunk.proto() == nullptr) {
    return ParseChunkHeader(chunk.wire(), header, contents).ok();
  }
  const ChunkData& proto = *chunk.proto();
  if (!SplitChunkHead(proto, proto.ByteSizeLong(), proto.data().ByteSizeLong(),
                      header)) {
    return false;
  }
  for (const tensorflow::TensorProto& tensor : proto.data().tensors()) {
    if (!SplitTensorHead(tensor, tensor.ByteSizeLong(),
                         header->mutable_data()->add_tensors())) {
      return false;
    }
    // The chunk holds the bytes (TrimChunk's cord shares them).
    contents->push_back(
        absl::MakeCordFromExternal(tensor.tensor_content(), [] {}));
  }
  return true;
}

}  // namespace

RowRange RowsRead(const FlatTrajectory& trajectory, uint64_t chunk_key) {
  int64_t first = -1;
  int64_t end = 0;
  for (const auto& column : trajectory.columns()) {
    for (const auto& slice : column.chunk_slices()) {
      if (slice.chunk_key() != chunk_key) continue;
      if (first < 0 || slice.offset() < first) first = slice.offset();
      end = std::max<int64_t>(end, int64_t{slice.offset()} + slice.length());
    }
  }
  if (first < 0) return RowRange();
  return RowRange{static_cast<int32_t>(first),
                  static_cast<int32_t>(end - first)};
}

std::optional<absl::Cord> TrimChunk(const Chunk& chunk, RowRange rows) {
  const int64_t total = chunk.num_rows();
  if (rows.first < 0 || rows.count <= 0 || rows.first > total - rows.count ||
      static_cast<int64_t>(chunk.DataByteSizeLong()) / total *
              (total - rows.count) <
          kMinTrimmedBytes) {
    return std::nullopt;
  }
  ChunkData header;
  std::vector<absl::Cord> contents;
  if (!SplitChunk(chunk, &header, &contents) || header.delta_encoded() ||
      header.sequence_range().sparse() || header.first_row() != 0 ||
      header.deprecated_data_size() > 0 ||
      header.data().tensors_size() != static_cast<int>(contents.size())) {
    return std::nullopt;
  }
  ChunkData::Data data = std::move(*header.mutable_data());
  header.clear_data();
  std::vector<absl::Cord> kept;
  int64_t uncompressed = 0;
  for (int i = 0; i < data.tensors_size(); ++i) {
    tensorflow::TensorProto& tensor = *data.mutable_tensors(i);
    std::vector<int64_t> shape;
    absl::StatusOr<int> element_size = DataTypeSize(tensor.dtype());
    if (!element_size.ok() || tensor.dtype() == tensorflow::DT_STRING ||
        !ShapeFromProto(tensor, &shape).ok() || shape.empty() ||
        shape[0] != total) {
      return std::nullopt;
    }
    size_t length = *element_size;
    for (int64_t dim : shape) length *= dim;
    const absl::Cord& content = contents[i];
    size_t offset = 0;
    if (!SnappyStoredOffset(content, length, &offset)) {
      return std::nullopt;
    }
    const size_t row_bytes = length / total;
    const size_t bytes = row_bytes * rows.count;
    absl::Cord trimmed(StoredHeader(bytes));
    trimmed.Append(content.Subcord(offset + row_bytes * rows.first, bytes));
    kept.push_back(std::move(trimmed));
    tensor.mutable_tensor_shape()->mutable_dim(0)->set_size(rows.count);
    uncompressed += static_cast<int64_t>(bytes);
  }
  header.set_first_row(rows.first);
  header.set_data_uncompressed_size(uncompressed);
  SequenceRange* range = header.mutable_sequence_range();
  range->set_start(range->start() + rows.first);
  range->set_end(range->start() + rows.count - 1);
  // The header's fields, then `data` with each tensor's content after its
  // other fields (as chunk_encoding.h writes chunks).
  std::vector<std::string> heads;
  size_t data_size = 0;
  for (int i = 0; i < data.tensors_size(); ++i) {
    data.mutable_tensors(i)->clear_tensor_content();
    heads.push_back(data.tensors(i).SerializeAsString());
    data_size += LengthDelimitedSize(heads.back().size() +
                                     LengthDelimitedSize(kept[i].size()));
  }
  absl::Cord out(header.SerializeAsString() +
                 FieldHeader(kChunkDataField, data_size));
  for (size_t i = 0; i < kept.size(); ++i) {
    out.Append(
        FieldHeader(kDataTensorsField,
                    heads[i].size() + LengthDelimitedSize(kept[i].size())) +
        heads[i] + FieldHeader(kTensorContentField, kept[i].size()));
    out.Append(std::move(kept[i]));
  }
  return out;
}

std::optional<absl::Cord> TrimChunk(const Chunk& chunk,
                                    const FlatTrajectory& trajectory) {
  if (static_cast<int64_t>(chunk.DataByteSizeLong()) <= kMinTrimmedBytes) {
    return std::nullopt;
  }
  return TrimChunk(chunk, RowsRead(trajectory, chunk.key()));
}

void UntrimSlices(absl::Span<const ChunkData* const> chunks,
                  FlatTrajectory* trajectory) {
  if (std::none_of(chunks.begin(), chunks.end(), [](const ChunkData* chunk) {
        return chunk->first_row() != 0;
      })) {
    return;
  }
  for (auto& column : *trajectory->mutable_columns()) {
    for (auto& slice : *column.mutable_chunk_slices()) {
      // The last chunk of that key, as the sampler reads (a response
      // should not carry one twice).
      for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
        if ((*it)->chunk_key() == slice.chunk_key()) {
          // A broken server's rows may put the offset out of range: -1
          // then, which unpacking refuses.
          const int64_t offset =
              int64_t{slice.offset()} - int64_t{(*it)->first_row()};
          slice.set_offset(offset < 0 ||
                                   offset > std::numeric_limits<int32_t>::max()
                               ? -1
                               : static_cast<int32_t>(offset));
          break;
        }
      }
    }
  }
}

}  // namespace deepmind::reverb
