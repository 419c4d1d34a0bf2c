#include "cc/wire/insert_request.h"

#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "cc/core/chunk.h"
#include "cc/support/quiet_parse.h"
#include "cc/support/status_macros.h"
#include "cc/support/wire_reader.h"
#include "cc/wire/chunk_encoding.h"

namespace deepmind::reverb {
namespace {

// InsertStreamRequest's fields.
constexpr int kRequestChunks = 1;
constexpr int kRequestItems = 2;
constexpr int kRequestKeepChunkKeys = 3;
constexpr int kRequestSharedChunks = 1000;

absl::Status Malformed() {
  return absl::InvalidArgumentError("Malformed InsertStreamRequest.");
}

// Packed or not: protobuf parsers accept both for a repeated varint.
bool ReadKeys(WireReader& reader, WireType type, std::vector<uint64_t>* keys) {
  uint64_t key;
  if (type == kVarint) {
    if (!reader.ReadVarint(&key)) return false;
    keys->push_back(key);
    return true;
  }
  absl::Cord packed;
  if (type != kLengthDelimited || !reader.ReadLengthDelimited(&packed)) {
    return false;
  }
  WireReader values(packed);
  while (!values.done()) {
    if (!values.ReadVarint(&key)) return false;
    keys->push_back(key);
  }
  return true;
}

}  // namespace

grpc::ByteBuffer EncodeInsertRequest(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks,
    absl::Span<const SharedMemoryChunk> shared_chunks,
    absl::Span<const absl::Cord> chunk_bytes) {
  WireBuffer wire;
  for (const auto& chunk : chunks) {
    wire.PutChunk(kRequestChunks, *chunk, chunk->ByteSizeLong(),
                  [&chunk]() -> std::shared_ptr<const void> { return chunk; });
  }
  for (const absl::Cord& bytes : chunk_bytes) {
    wire.PutBytes(kRequestChunks, bytes, [&bytes] {
      return std::shared_ptr<const void>(std::make_shared<absl::Cord>(bytes));
    });
  }
  request.AppendToString(wire.pending());
  for (const SharedMemoryChunk& chunk : shared_chunks) {
    const size_t size = chunk.ByteSizeLong();
    wire.PutFieldHeader(kRequestSharedChunks, size);
    wire.PutMessage(chunk, size);
  }
  return wire.Finish();
}

absl::Status DecodeInsertRequest(const grpc::ByteBuffer& bytes,
                                 DecodedInsertRequest* request) {
  request->chunks.clear();
  request->items.clear();
  request->keep_chunk_keys.clear();
  request->shared_chunks.clear();
  const absl::Cord cord = ReceivedCord(bytes);
  WireReader reader(cord);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return Malformed();
    if (field == kRequestKeepChunkKeys) {
      if (!ReadKeys(reader, type, &request->keep_chunk_keys)) {
        return Malformed();
      }
      continue;
    }
    if (field == kRequestSharedChunks && type == kLengthDelimited) {
      absl::Cord value;
      if (!reader.ReadLengthDelimited(&value) ||
          !ParseQuietly(std::string(value),
                        &request->shared_chunks.emplace_back())) {
        return Malformed();
      }
      continue;
    }
    if (field != kRequestChunks && field != kRequestItems) {
      if (!reader.Skip(type)) return Malformed();
      continue;
    }
    absl::Cord value;
    if (type != kLengthDelimited || !reader.ReadLengthDelimited(&value)) {
      return Malformed();
    }
    if (field == kRequestChunks) {
      if (value.size() < kMinBorrowedBytes) {
        // A copy of its own, in one allocation where it is in one piece.
        const absl::optional<absl::string_view> flat = value.TryFlat();
        value = flat.has_value() ? absl::Cord(*flat)
                                 : absl::Cord(std::string(value));
      }
      REVERB_ASSIGN_OR_RETURN(auto chunk, Chunk::Parse(std::move(value)));
      request->chunks.push_back(std::move(chunk));
    } else {
      if (!ParseQuietly(value, &request->items.emplace_back())) {
        return Malformed();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
