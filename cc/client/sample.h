// Sample: what a sampler hands to its user, and how it is rebuilt from the
// chunks a SampleStream (or a table) delivers.
//
// Each column of the item's FlatTrajectory is the concatenation (along the
// time dimension) of its chunk slices: tensor `index` of chunk `chunk_key`,
// rows [offset, offset + length). A squeezed column has exactly one row and
// loses the time dimension.
#ifndef REVERB_CC_CLIENT_SAMPLE_H_
#define REVERB_CC_CLIENT_SAMPLE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "cc/tensor/tensor.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

struct REVERB_EXPORT Sample {
  // Shared, not copied: a sampled one points into the response it came in,
  // which it keeps alive.
  std::shared_ptr<const SampleInfo> info;
  std::vector<Tensor> columns;
};

// The contents of a chunk's tensors where they lie apart from its header
// (ParseChunkHeader, cc/core/chunk.h): `views`, one per tensor. A chunk read
// from shared memory has them in the mapping of segment `segment` (there as
// long as the mapping is), `size` bytes from `base`: a tensor stored
// uncompressed (SnappyStoredOffset, cc/tensor/snappy_decode.h) whose view
// lies there is then read from the file into its destination, so that its
// pages are not faulted in for one read (that costs more than the copy).
// A segment whose mapping was kept from an earlier sample (its pages mapped
// already: SharedMemoryClient) names no `segment`: its views are read where
// they are. A content received over gRPC lies in gRPC's receive buffers
// (DecodeSampleResponse, cc/wire/sample_response.h), often across two or
// more: it is then in `pieces` (its view empty), whose bytes go to their
// destination piece by piece where the tensor is stored uncompressed, and
// are flattened (copied) first to be decompressed.
struct REVERB_EXPORT ChunkContents {
  std::vector<absl::string_view> views;
  // Per tensor, the content that is not flat, else null; empty if none is.
  std::vector<const absl::Cord*> pieces;
  std::string segment;  // Empty: none; the views are read where they are.
  const char* base = nullptr;
  size_t size = 0;
};

// The contents of a response's chunks that lie apart from their headers,
// by chunk, and the pieces of memory their views point into.
struct REVERB_EXPORT HeldChunkContents {
  // Makes `pieces` (ParseChunkHeader's `contents`) the contents of `chunk`
  // and keeps them: the views (and ChunkContents::pieces, for a piece that
  // is not flat) stay valid as long as this does. A cord holds a piece of
  // up to 15 bytes inside itself, not in the memory it was cut from (so
  // such a view never lies in a segment's mapping).
  ChunkContents& Hold(const ChunkData* chunk, std::vector<absl::Cord> pieces);

  absl::node_hash_map<const ChunkData*, ChunkContents> contents;
  // Not a vector: a cord keeps a small piece inside itself.
  std::deque<absl::Cord> pieces;
};

// A sample as a stream delivers it: its info and the chunks it references,
// still compressed, where the stream parsed them; `info` and `owners` keep
// those responses alive (usually one; more when a sample spans responses).
// `contents` holds, for each chunk, null or the contents of its tensors
// where they lie apart (empty if no chunk has them apart).
// Inline vectors: a sample usually has a chunk or two, and a stream of
// small samples makes one of these per sample.
struct REVERB_EXPORT PackedSample {
  std::shared_ptr<const SampleInfo> info;
  absl::InlinedVector<const ChunkData*, 2> chunks;
  absl::InlinedVector<const ChunkContents*, 2> contents;
  absl::InlinedVector<std::shared_ptr<const void>, 1> owners;
};

// Tensor `index` of a chunk, decompressed and delta-decoded; its content is
// `contents`[index] if `contents` is given, else the proto's own.
// INVALID_ARGUMENT if there is no such tensor or its data is corrupt.
REVERB_EXPORT absl::StatusOr<Tensor> UnpackChunkTensor(
    const ChunkData& chunk, int index, const ChunkContents* contents = nullptr);

// What the slices of a sample may hold in all: kMaxSampleExpansion times
// the decompressed chunk tensors they reference, plus
// kSampleExpansionAllowance bytes. Slices of an honest server's sample
// overlap little (two columns of one step's data, as observation and next
// observation, hold it twice); a hostile or broken server's response whose
// slices repeat its tensors thousands of times would otherwise make the
// client allocate that much more memory than the response holds.
inline constexpr int64_t kMaxSampleExpansion = 64;
inline constexpr int64_t kSampleExpansionAllowance = 1 << 20;

// INVALID_ARGUMENT if a referenced chunk is missing or its data cannot
// serve the slices (corrupt data, out-of-range rows, mismatched dtypes, or
// slices holding more than the bound above).
// `contents`: as PackedSample's.
REVERB_EXPORT absl::StatusOr<Sample> UnpackSample(
    std::shared_ptr<const SampleInfo> info,
    absl::Span<const ChunkData* const> chunks,
    absl::Span<const ChunkContents* const> contents = {});
REVERB_EXPORT absl::StatusOr<Sample> UnpackSample(PackedSample packed);

// The dtype and shape of a column.
struct REVERB_EXPORT ColumnShape {
  tensorflow::DataType dtype = tensorflow::DT_INVALID;
  std::vector<int64_t> shape;

  bool operator==(const ColumnShape& other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  bool operator!=(const ColumnShape& other) const { return !(*this == other); }
};

// The shapes of `packed`'s columns as UnpackSample would make them, read
// from its chunks' headers without decompressing anything, into `*shapes`
// (whose memory is reused: a batch's samples are read into one vector);
// false (and `*shapes` unspecified) where UnpackSampleInto does not apply
// (a string column) or UnpackSample would fail (which UnpackSample then
// reports).
REVERB_EXPORT bool PackedColumnShapes(const PackedSample& packed,
                                      std::vector<ColumnShape>* shapes);

// Unpacks `packed` into row `row` of `batch`: one numeric tensor per column,
// of shape [rows, PackedColumnShapes(packed)[c]...], holding all its
// elements already. A column that is one whole chunk tensor is
// decompressed straight into its row, and rows of a tensor stored
// uncompressed (data Snappy does not shrink) are copied straight from it;
// other slices are decompressed apart (each chunk tensor once) and their
// rows copied in. INVALID_ARGUMENT for
// corrupt data, or if the batch does not have the sample's shapes.
REVERB_EXPORT absl::Status UnpackSampleInto(const PackedSample& packed,
                                            int64_t row,
                                            absl::Span<Tensor> batch);

// Gives the columns' buffers to BufferPool::Default(), for a caller that
// has copied the sample's data out: the next samples' unpacking reuses
// them instead of faulting in fresh pages.
REVERB_EXPORT void RecycleSample(Sample* sample);

// The columns' row `step` (all columns must have the same number of rows and
// none may be squeezed). INVALID_ARGUMENT otherwise.
REVERB_EXPORT absl::StatusOr<std::vector<Tensor>> GetTimestep(
    const Sample& sample, int64_t step);

// Number of timesteps of a sample whose columns all have the same length;
// INVALID_ARGUMENT ("Can't split non timestep trajectory into timesteps.")
// otherwise.
REVERB_EXPORT absl::StatusOr<int64_t> NumTimesteps(const Sample& sample);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SAMPLE_H_
