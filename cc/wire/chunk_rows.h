// Chunks trimmed to the rows a sample reads.
//
// A chunk holds the steps of several items, and a sample reads some of its
// rows: an item of one step in a chunk of two, a sequence that starts in
// the middle of one chunk and ends in the middle of the next. Samples
// carry their chunks whole, as dm-reverb sends them. A sampler that asks
// for it (SampleStreamRequest.trimmed_chunks, which our clients set) is
// sent a chunk as the rows its sample reads instead, where that spares
// kMinTrimmedBytes or more and needs no decoding: no tensor compressed
// (they are stored as snappy does not shrink them, cc/tensor/compression.h;
// rows of a stored tensor are a range of its bytes, borrowed, not copied),
// no delta encoding, steps not sparse. ChunkData.first_row says which row
// the rows sent start at; the sampler moves the sample's slice offsets by
// it (UntrimSlices) and unpacks the sample as before.
#ifndef REVERB_CC_WIRE_CHUNK_ROWS_H_
#define REVERB_CC_WIRE_CHUNK_ROWS_H_

#include <cstdint>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/types/span.h"
#include "cc/core/chunk.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

// Bytes a trimmed chunk must spare.
inline constexpr int64_t kMinTrimmedBytes = 16 << 10;

// Rows [first, first + count) of a chunk.
struct RowRange {
  int32_t first = 0;
  int32_t count = 0;
};

// The rows of chunk `chunk_key` that `trajectory` reads: from the first
// row a slice of it starts at to the last any reads. Empty if none does.
REVERB_EXPORT RowRange RowsRead(const FlatTrajectory& trajectory,
                                uint64_t chunk_key);

// `chunk` as the serialized ChunkData of its rows `rows` (first_row set,
// every tensor's first dimension `rows.count`), its contents sharing
// `chunk`'s bytes (valid while `chunk` lives); nullopt if it cannot be
// trimmed so (see above) or that would spare less than kMinTrimmedBytes.
REVERB_EXPORT std::optional<absl::Cord> TrimChunk(const Chunk& chunk,
                                                  RowRange rows);
// As above, for the rows `trajectory` reads of it (RowsRead; not looked
// for in a chunk too small to spare kMinTrimmedBytes).
REVERB_EXPORT std::optional<absl::Cord> TrimChunk(
    const Chunk& chunk, const FlatTrajectory& trajectory);

// Moves the offsets of the slices of `trajectory` that read a chunk of
// `chunks` sent trimmed to count from its first row as sent.
REVERB_EXPORT void UntrimSlices(absl::Span<const ChunkData* const> chunks,
                                FlatTrajectory* trajectory);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_WIRE_CHUNK_ROWS_H_
