#include "cc/wire/sample_response.h"

#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "cc/support/quiet_parse.h"
#include "cc/support/status_macros.h"
#include "cc/support/varint.h"
#include "cc/support/wire_reader.h"
#include "cc/wire/chunk_rows.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace deepmind::reverb {
namespace {

// Field numbers of SampleStreamResponse and its SampleEntry.
constexpr int kResponseEntries = 1;
constexpr int kEntryInfo = 1;
constexpr int kEntryData = 2;
constexpr int kEntryEndOfSequence = 3;
constexpr int kEntrySharedData = 1000;  // An extension: SharedMemoryChunks.

// The bytes of a SharedMemoryChunk naming `segment`.
std::string SharedChunkMessage(std::string segment) {
  SharedMemoryChunk message;
  message.set_segment(std::move(segment));
  return message.SerializeAsString();
}

void PutDouble(double value, std::string* out) {
  char bytes[8];
  std::memcpy(bytes, &value, 8);  // Little-endian, as the wire format.
  out->append(bytes, 8);
}

absl::Status Malformed() {
  return absl::InvalidArgumentError("Malformed SampleStreamResponse.");
}

// One SampleEntry (see DecodeSampleResponse).
absl::Status DecodeEntry(
    const absl::Cord& wire, SampleStreamResponse::SampleEntry* entry,
    absl::FunctionRef<void(const ChunkData*, std::vector<absl::Cord>)> apart) {
  if (wire.size() < kMinBorrowedBytes) {
    return ParseQuietly(wire, entry) ? absl::OkStatus() : Malformed();
  }
  // Every field but the chunks, copied and parsed by protobuf; then the
  // chunks, in order.
  std::string rest;
  absl::InlinedVector<absl::Cord, 2> chunks;
  WireReader reader(wire);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return Malformed();
    if (field == kEntryData && type == kLengthDelimited) {
      if (!reader.ReadLengthDelimited(&chunks.emplace_back())) {
        return Malformed();
      }
    } else if (!reader.CopyField(field, type, &rest)) {
      return Malformed();
    }
  }
  if (!ParseQuietly(rest, entry)) return Malformed();
  for (const absl::Cord& chunk_wire : chunks) {
    ChunkData* chunk = entry->add_data();
    if (chunk_wire.size() < kMinBorrowedBytes) {
      if (!ParseQuietly(chunk_wire, chunk)) return Malformed();
      continue;
    }
    std::vector<absl::Cord> contents;
    if (!ParseChunkHeader(chunk_wire, chunk, &contents).ok()) {
      return Malformed();
    }
    apart(chunk, std::move(contents));
  }
  return absl::OkStatus();
}

// Whether `wire` (a response) has an entry of kMinBorrowedBytes or more
// (false also if it is malformed: protobuf then says so).
bool HasLargeEntry(const absl::Cord& wire) {
  WireReader reader(wire);
  while (!reader.done()) {
    int field;
    WireType type;
    uint64_t size;
    if (!reader.ReadTag(&field, &type)) return false;
    if (type != kLengthDelimited) {
      if (!reader.Skip(type)) return false;
    } else if (!reader.SkipLengthDelimited(&size)) {
      return false;
    } else if (field == kResponseEntries && size >= kMinBorrowedBytes) {
      return true;
    }
  }
  return false;
}

// The entries of `wire` (a response with a large entry), as
// DecodeSampleResponse decodes them.
absl::Status DecodeEntries(
    const absl::Cord& wire, SampleStreamResponse* response,
    absl::FunctionRef<void(const ChunkData*, std::vector<absl::Cord>)> apart) {
  WireReader reader(wire);
  while (!reader.done()) {
    int field;
    WireType type;
    if (!reader.ReadTag(&field, &type)) return Malformed();
    if (field != kResponseEntries || type != kLengthDelimited) {
      if (!reader.Skip(type)) return Malformed();
      continue;
    }
    absl::Cord entry;
    if (!reader.ReadLengthDelimited(&entry)) return Malformed();
    REVERB_RETURN_IF_ERROR(DecodeEntry(entry, response->add_entries(), apart));
  }
  return absl::OkStatus();
}

// The bytes of PrioritizedItem.priority and .times_sampled that follow the
// item's own (of a scalar field given twice, a parser keeps the last).
size_t OverridesSize(const SampledItem& sample) {
  return 1 + 8 + 1 +
         VarintSize(static_cast<uint64_t>(int64_t{sample.times_sampled}));
}

// The size of the SampleInfo PutSampleInfo writes.
size_t SampleInfoSize(const SampledItem& sample) {
  const size_t item = sample.ref->encoded_item.size() + OverridesSize(sample);
  return 1 + VarintSize(item) + item + 1 + 8 + 1 +
         VarintSize(static_cast<uint64_t>(sample.table_size)) +
         (sample.rate_limited ? 2 : 0);
}

// Appends the SampleInfo of `sample` to `out` (EncodeSampleInfo's bytes).
void PutSampleInfo(const SampledItem& sample, std::string* out) {
  const std::string& item = sample.ref->encoded_item;
  PutTag(1, kLengthDelimited, out);  // SampleInfo.item
  PutVarint64(item.size() + OverridesSize(sample), out);
  out->append(item);
  PutTag(5, kFixed64, out);  // PrioritizedItem.priority
  PutDouble(sample.priority, out);
  PutTag(6, kVarint, out);  // PrioritizedItem.times_sampled
  PutVarint64(static_cast<uint64_t>(int64_t{sample.times_sampled}), out);
  PutTag(2, kFixed64, out);  // SampleInfo.probability
  PutDouble(sample.probability, out);
  PutTag(3, kVarint, out);  // SampleInfo.table_size
  PutVarint64(static_cast<uint64_t>(sample.table_size), out);
  if (sample.rate_limited) {
    PutTag(4, kVarint, out);  // SampleInfo.rate_limited
    out->push_back(1);
  }
}

// Asks for the cache lines of [begin, begin + size).
void Prefetch(const void* begin, size_t size = 1) {
  const char* p = static_cast<const char*>(begin);
  for (size_t at = 0; at < size; at += 64) __builtin_prefetch(p + at);
}

}  // namespace

absl::Status DecodeSampleResponse(
    const grpc::ByteBuffer& bytes, SampleStreamResponse* response,
    absl::FunctionRef<void(const ChunkData*, std::vector<absl::Cord>)> apart) {
  const absl::Cord wire = ReceivedCord(bytes);
  if (!HasLargeEntry(wire)) {
    // Small samples only: protobuf's parse of the whole response, from
    // gRPC's buffers (each entry parsed apart would cost more).
    grpc::ByteBuffer shared(bytes);
    grpc::ProtoBufferReader stream(&shared);
    return response->ParseFromZeroCopyStream(&stream) ? absl::OkStatus()
                                                      : Malformed();
  }
  return DecodeEntries(wire, response, apart);
}

absl::Status DecodeSampleResponse(
    const absl::Cord& wire, SampleStreamResponse* response,
    absl::FunctionRef<void(const ChunkData*, std::vector<absl::Cord>)> apart) {
  if (!HasLargeEntry(wire)) {
    return ParseQuietly(wire, response) ? absl::OkStatus() : Malformed();
  }
  return DecodeEntries(wire, response, apart);
}

grpc::ByteBuffer SharedResponseBytes(std::string segment, size_t size) {
  SampleStreamResponse response;
  response.mutable_shared_response()->set_segment(std::move(segment));
  response.mutable_shared_response()->set_size(size);
  const std::string bytes = response.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string EncodeSampleInfo(const SampledItem& sample) {
  std::string out;
  out.reserve(SampleInfoSize(sample));
  PutSampleInfo(sample, &out);
  return out;
}

void AppendSample(const SampledItem& sample, int64_t max_response_bytes,
                  std::deque<SampleResponseBytes>* responses,
                  absl::FunctionRef<std::string(const Chunk&)> lend,
                  bool trim_chunks) {
  const size_t info_size = SampleInfoSize(sample);
  const auto& chunks = sample.ref->chunks;
  size_t next = 0;  // The first chunk not yet written.
  bool with_info = true;
  // This entry's SharedMemoryChunks, and the chunks sent as the rows the
  // sample reads (chunk_rows.h): a sample has a chunk or two, mostly.
  absl::InlinedVector<std::string, 2> lent(chunks.size());
  absl::InlinedVector<std::optional<absl::Cord>, 2> trimmed(chunks.size());
  do {
    if (responses->empty() || responses->back().size >= max_response_bytes) {
      responses->emplace_back();
    }
    // This entry's chunks: until the response passes the cap. Lent chunks
    // count as their size too: the links hold that much memory until the
    // client takes them.
    int64_t bytes = responses->back().size + (with_info ? info_size : 0);
    size_t end = next;
    size_t entry_size = with_info ? LengthDelimitedSize(info_size) : 0;
    while (end < chunks.size() && bytes < max_response_bytes) {
      const Chunk& chunk = *chunks[end];
      size_t chunk_size = chunk.DataByteSizeLong();
      if (!chunk.segment().empty()) lent[end] = lend(chunk);
      if (lent[end].empty() && trim_chunks) {
        trimmed[end] = TrimChunk(chunk, sample.ref->item.flat_trajectory());
        if (trimmed[end].has_value()) chunk_size = trimmed[end]->size();
      }
      if (lent[end].empty()) {
        entry_size += LengthDelimitedSize(chunk_size);
      } else {
        lent[end] = SharedChunkMessage(std::move(lent[end]));
        entry_size += VarintSize(kEntrySharedData << 3) +
                      VarintSize(lent[end].size()) + lent[end].size();
      }
      bytes += static_cast<int64_t>(chunk_size);
      ++end;
    }
    const bool end_of_sequence = end == chunks.size();
    if (end_of_sequence) entry_size += 2;  // Tag and true.
    WireBuffer& wire = responses->back().wire;
    wire.PutFieldHeader(kResponseEntries, entry_size);
    if (with_info) {
      wire.PutFieldHeader(kEntryInfo, info_size);
      wire.Reserve(info_size);
      PutSampleInfo(sample, wire.pending());
    }
    for (; next < end; ++next) {
      const std::shared_ptr<Chunk>& chunk = chunks[next];
      auto owner = [&chunk]() -> std::shared_ptr<const void> { return chunk; };
      if (trimmed[next].has_value()) {
        wire.PutBytes(kEntryData, *trimmed[next], owner);
      } else if (!lent[next].empty()) {
        wire.PutFieldHeader(kEntrySharedData, lent[next].size());
        wire.Reserve(lent[next].size());
        wire.pending()->append(lent[next]);
      } else if (chunk->proto() != nullptr) {
        wire.PutChunk(kEntryData, *chunk->proto(), chunk->DataByteSizeLong(),
                      owner);
      } else {
        wire.PutBytes(kEntryData, chunk->wire(), owner);
      }
    }
    if (end_of_sequence) wire.PutVarintField(kEntryEndOfSequence, 1);
    responses->back().size = bytes;
    with_info = false;
  } while (next < chunks.size());
}

void AppendSamples(absl::Span<const SampledItem> samples,
                   int64_t max_response_bytes,
                   std::deque<SampleResponseBytes>* responses,
                   absl::FunctionRef<std::string(const Chunk&)> lend,
                   bool trim_chunks) {
  // Each link is fetched two samples after the one it is read from.
  constexpr size_t kItemAhead = 6, kPointeesAhead = 4, kChunkAhead = 2;
  const size_t n = samples.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kItemAhead < n) {
      const TableItem* item = samples[i + kItemAhead].ref.get();
      Prefetch(&item->chunks);
      Prefetch(&item->encoded_item);
    }
    if (i + kPointeesAhead < n) {
      const TableItem& item = *samples[i + kPointeesAhead].ref;
      Prefetch(item.encoded_item.data(), item.encoded_item.size());
      Prefetch(item.chunks.data());
    }
    if (i + kChunkAhead < n) {
      const auto& chunks = samples[i + kChunkAhead].ref->chunks;
      if (!chunks.empty()) Prefetch(chunks.front().get(), sizeof(Chunk));
    }
    AppendSample(samples[i], max_response_bytes, responses, lend, trim_chunks);
  }
}

}  // namespace deepmind::reverb
