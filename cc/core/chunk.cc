#include "cc/core/chunk.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cc/support/quiet_parse.h"
#include "cc/support/status_macros.h"
#include "cc/support/wire_reader.h"

namespace deepmind::reverb {

namespace {

absl::Status NotAChunk(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("Chunk does not parse as a ChunkData: ", what, "."));
}

// Splits `tensor` (a serialized TensorProto) into its fields but the
// content, parsed into `head`, and its content (sharing `tensor`'s memory).
absl::Status SplitTensor(const absl::Cord& tensor,
                         tensorflow::TensorProto* head, absl::Cord* content) {
  WireReader reader(tensor);
  std::string fields;
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return NotAChunk("bad tensor");
    // The last content wins, as for protobuf.
    const bool ok = field == kTensorContentField && type == kLengthDelimited
                        ? reader.ReadLengthDelimited(content)
                        : reader.CopyField(field, type, &fields);
    if (!ok) return NotAChunk("bad tensor");
  }
  if (!ParseQuietly(fields, head)) return NotAChunk("bad tensor");
  return absl::OkStatus();
}

// The tensors of `data` (a ChunkData.Data) into `header`'s and `contents`.
absl::Status SplitTensors(const absl::Cord& data, ChunkData* header,
                          std::vector<absl::Cord>* contents) {
  WireReader reader(data);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return NotAChunk("bad data");
    if (field != kDataTensorsField || type != kLengthDelimited) {
      if (!reader.Skip(type)) return NotAChunk("bad data");
      continue;
    }
    absl::Cord tensor;
    if (!reader.ReadLengthDelimited(&tensor)) return NotAChunk("bad data");
    REVERB_RETURN_IF_ERROR(SplitTensor(tensor,
                                       header->mutable_data()->add_tensors(),
                                       &contents->emplace_back()));
  }
  return absl::OkStatus();
}

// end - start + 1, computed without overflow, within [0, INT32_MAX] (a
// range from a client may be anything; items are checked against it).
int32_t NumRows(const SequenceRange& range) {
  const int64_t rows = static_cast<int64_t>(range.end()) - range.start() + 1;
  return static_cast<int32_t>(
      std::clamp<int64_t>(rows, 0, std::numeric_limits<int32_t>::max()));
}

}  // namespace

Chunk::Chunk(const ChunkData& data)
    : Chunk(absl::Cord(data.SerializeAsString()), nullptr, data,
            data.data().tensors_size()) {}

std::shared_ptr<Chunk> Chunk::Share(std::shared_ptr<const ChunkData> data) {
  const ChunkData& header = *data;
  return std::shared_ptr<Chunk>(new Chunk(absl::Cord(), std::move(data), header,
                                          header.data().tensors_size()));
}

Chunk::Chunk(absl::Cord wire, std::shared_ptr<const ChunkData> proto,
             const ChunkData& header, int num_tensors)
    : wire_(std::move(wire)),
      proto_(std::move(proto)),
      size_(proto_ != nullptr ? proto_->ByteSizeLong() : wire_.size()),
      key_(header.chunk_key()),
      episode_id_(header.sequence_range().episode_id()),
      num_rows_(NumRows(header.sequence_range())),
      num_columns_(header.data_tensors_len() > 0 ? header.data_tensors_len()
                                                 : num_tensors),
      uncompressed_size_(
          std::max<int64_t>(1, header.data_uncompressed_size())) {}

absl::Status ParseChunkHeader(const absl::Cord& wire, ChunkData* header,
                              std::vector<absl::Cord>* contents) {
  contents->clear();
  // Every field but `data`, copied and parsed by protobuf; then the tensors.
  std::string head;
  ChunkData tensors;
  WireReader reader(wire);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return NotAChunk("bad field");
    if (field == kChunkDataField && type == kLengthDelimited) {
      absl::Cord data;
      if (!reader.ReadLengthDelimited(&data)) return NotAChunk("bad data");
      REVERB_RETURN_IF_ERROR(SplitTensors(data, &tensors, contents));
    } else if (!reader.CopyField(field, type, &head)) {
      return NotAChunk("bad field");
    }
  }
  if (!ParseQuietly(head, header)) return NotAChunk("bad header");
  header->mutable_data()->mutable_tensors()->Swap(
      tensors.mutable_data()->mutable_tensors());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Chunk>> Chunk::Parse(absl::Cord wire,
                                                    std::string segment) {
  ChunkData header;
  std::vector<absl::Cord> contents;
  REVERB_RETURN_IF_ERROR(ParseChunkHeader(wire, &header, &contents));
  auto chunk = std::shared_ptr<Chunk>(new Chunk(
      std::move(wire), nullptr, header, static_cast<int>(contents.size())));
  chunk->segment_ = std::move(segment);
  return chunk;
}

std::string Chunk::Serialize() const {
  return proto_ != nullptr ? proto_->SerializeAsString() : std::string(wire_);
}

ChunkData Chunk::ToProto() const {
  if (proto_ != nullptr) return *proto_;
  ChunkData data;
  // Parsed from the cord's pieces: wire_ is valid (checked by Parse).
  data.ParseFromString(std::string(wire_));
  return data;
}

std::shared_ptr<const ChunkData> Chunk::SharedProto() const {
  if (proto_ != nullptr) return proto_;
  return std::make_shared<const ChunkData>(ToProto());
}

}  // namespace deepmind::reverb
