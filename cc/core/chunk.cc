#include "cc/core/chunk.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
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
int32_t NumRows(int32_t start, int32_t end) {
  const int64_t rows = static_cast<int64_t>(end) - start + 1;
  return static_cast<int32_t>(
      std::clamp<int64_t>(rows, 0, std::numeric_limits<int32_t>::max()));
}

// The Scan of a chunk's parts: each true only for a value of the form
// writers send (varint fields of their types, the messages below), whose
// fields it reads as protobuf would. Anything else, valid or not, is false.

// A message of varint fields numbered 1 to `max_field` only; `take` gets
// each (field, value). Each reads `reader` to its end.
template <typename Take>
bool ScanVarints(WireReader& reader, int max_field, Take take) {
  while (!reader.done()) {
    int field;
    WireType type;
    uint64_t value;
    if (!reader.ReadTag(&field, &type) || type != kVarint ||
        field > max_field || !reader.ReadVarint(&value)) {
      return false;
    }
    take(field, value);
  }
  return true;
}

// A TensorShapeProto of dims of a size only (a name is a string, which
// protobuf checks for UTF-8).
bool ScanShape(WireReader& reader) {
  constexpr int kDim = 2, kUnknownRank = 3;
  while (!reader.done()) {
    int field;
    WireType type;
    uint64_t value;
    WireReader dim;
    if (!reader.ReadTag(&field, &type)) return false;
    const bool ok = field == kUnknownRank
                        ? type == kVarint && reader.ReadVarint(&value)
                        : field == kDim && type == kLengthDelimited &&
                              reader.ReadLengthDelimited(&dim) &&
                              ScanVarints(dim, 1, [](int, uint64_t) {});
    if (!ok) return false;
  }
  return true;
}

// A TensorProto of a dtype, a shape, a version and a content only.
bool ScanTensor(WireReader& reader) {
  constexpr int kDtype = 1, kShape = 2, kVersion = 3;
  while (!reader.done()) {
    int field;
    WireType type;
    uint64_t value;
    WireReader shape;
    if (!reader.ReadTag(&field, &type)) return false;
    bool ok = false;
    if (field == kDtype || field == kVersion) {
      ok = type == kVarint && reader.ReadVarint(&value);
    } else if (field == kShape) {
      ok = type == kLengthDelimited && reader.ReadLengthDelimited(&shape) &&
           ScanShape(shape);
    } else if (field == kTensorContentField) {
      ok = type == kLengthDelimited && reader.SkipLengthDelimited(&value);
    }
    if (!ok) return false;
  }
  return true;
}

// A ChunkData.Data of such tensors only, counted into `num_tensors`.
bool ScanData(WireReader& reader, int* num_tensors) {
  while (!reader.done()) {
    int field;
    WireType type;
    WireReader tensor;
    if (!reader.ReadTag(&field, &type) || field != kDataTensorsField ||
        type != kLengthDelimited || !reader.ReadLengthDelimited(&tensor) ||
        !ScanTensor(tensor)) {
      return false;
    }
    ++*num_tensors;
  }
  return true;
}

}  // namespace

std::optional<Chunk::Header> Chunk::Scan(const absl::Cord& wire) {
  // ChunkData's fields but `data` (kChunkDataField) and the deprecated
  // tensors, which take protobuf's path.
  constexpr int kKey = 1, kRange = 2, kDeltaEncoded = 4, kTensorsLen = 6,
                kUncompressedSize = 7, kFirstRow = 1000;
  Header header;
  WireReader reader(wire);
  while (!reader.done()) {
    int field;
    WireType type;
    uint64_t value = 0;
    WireReader message;
    if (!reader.ReadTag(&field, &type)) return std::nullopt;
    const bool read =
        field == kRange || field == kChunkDataField
            ? type == kLengthDelimited && reader.ReadLengthDelimited(&message)
            : type == kVarint && reader.ReadVarint(&value);
    if (!read) return std::nullopt;
    bool ok = true;
    switch (field) {
      case kRange:
        ok = ScanVarints(message, 4, [&](int f, uint64_t v) {
          if (f == 1) header.episode_id = v;
          if (f == 2) header.start = static_cast<int32_t>(v);
          if (f == 3) header.end = static_cast<int32_t>(v);
        });
        break;
      case kChunkDataField:
        ok = ScanData(message, &header.num_tensors);
        break;
      case kKey:
        header.key = value;
        break;
      case kTensorsLen:
        header.data_tensors_len = static_cast<int32_t>(value);
        break;
      case kUncompressedSize:
        header.data_uncompressed_size = static_cast<int64_t>(value);
        break;
      case kDeltaEncoded:
      case kFirstRow:
        break;
      default:
        ok = false;
    }
    if (!ok) return std::nullopt;
  }
  return header;
}

Chunk::Header Chunk::Summarize(const ChunkData& header, int num_tensors) {
  Header summary;
  summary.key = header.chunk_key();
  summary.episode_id = header.sequence_range().episode_id();
  summary.start = header.sequence_range().start();
  summary.end = header.sequence_range().end();
  summary.data_tensors_len = header.data_tensors_len();
  summary.data_uncompressed_size = header.data_uncompressed_size();
  summary.num_tensors = num_tensors;
  return summary;
}

Chunk::Chunk(const ChunkData& data)
    : Chunk(absl::Cord(data.SerializeAsString()), nullptr,
            Summarize(data, data.data().tensors_size())) {}

std::shared_ptr<Chunk> Chunk::Share(std::shared_ptr<const ChunkData> data) {
  const Header header = Summarize(*data, data->data().tensors_size());
  return std::shared_ptr<Chunk>(
      new Chunk(absl::Cord(), std::move(data), header));
}

Chunk::Chunk(absl::Cord wire, std::shared_ptr<const ChunkData> proto,
             const Header& header)
    : wire_(std::move(wire)),
      proto_(std::move(proto)),
      size_(proto_ != nullptr ? proto_->ByteSizeLong() : wire_.size()),
      key_(header.key),
      episode_id_(header.episode_id),
      num_rows_(NumRows(header.start, header.end)),
      num_columns_(header.data_tensors_len > 0 ? header.data_tensors_len
                                               : header.num_tensors),
      uncompressed_size_(std::max<int64_t>(1, header.data_uncompressed_size)) {}

absl::Status ParseChunkHeader(const absl::Cord& wire, ChunkData* header,
                              std::vector<absl::Cord>* contents) {
  contents->clear();
  // Every field but `data`, copied and parsed by protobuf; then the tensors
  // of each `data` (a message given twice merges, as protobuf's would),
  // added to the header's own: parsed apart, they would be copied across
  // when `header` lives on an arena.
  std::string head;
  absl::InlinedVector<absl::Cord, 1> data;
  WireReader reader(wire);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return NotAChunk("bad field");
    if (field == kChunkDataField && type == kLengthDelimited) {
      if (!reader.ReadLengthDelimited(&data.emplace_back())) {
        return NotAChunk("bad data");
      }
    } else if (!reader.CopyField(field, type, &head)) {
      return NotAChunk("bad field");
    }
  }
  if (!ParseQuietly(head, header)) return NotAChunk("bad header");
  header->mutable_data();  // Present, as in a chunk protobuf parses.
  for (const absl::Cord& tensors : data) {
    REVERB_RETURN_IF_ERROR(SplitTensors(tensors, header, contents));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Chunk>> Chunk::Parse(absl::Cord wire,
                                                    std::string segment) {
  std::optional<Header> header = Scan(wire);
  if (!header.has_value()) {
    ChunkData parsed;
    std::vector<absl::Cord> contents;
    REVERB_RETURN_IF_ERROR(ParseChunkHeader(wire, &parsed, &contents));
    header = Summarize(parsed, static_cast<int>(contents.size()));
  }
  auto chunk =
      std::shared_ptr<Chunk>(new Chunk(std::move(wire), nullptr, *header));
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
