#include "cc/sample.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "cc/support/status_macros.h"
#include "cc/tensor_compression.h"

namespace deepmind::reverb {
namespace {

// Decompresses each (chunk, tensor index) once per sample.
class ChunkTensors {
 public:
  explicit ChunkTensors(absl::Span<const ChunkData* const> chunks) {
    for (const ChunkData* chunk : chunks) chunks_[chunk->chunk_key()] = chunk;
  }

  absl::StatusOr<const Tensor*> Get(uint64_t key, int index) {
    auto cached = decoded_.find({key, index});
    if (cached != decoded_.end()) return &cached->second;
    auto it = chunks_.find(key);
    if (it == chunks_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sample references chunk ", key, " it did not carry."));
    }
    REVERB_ASSIGN_OR_RETURN(Tensor tensor,
                            UnpackChunkTensor(*it->second, index));
    return &decoded_.emplace(std::make_pair(key, index), std::move(tensor))
                .first->second;
  }

 private:
  absl::flat_hash_map<uint64_t, const ChunkData*> chunks_;
  absl::flat_hash_map<std::pair<uint64_t, int>, Tensor> decoded_;
};

}  // namespace

absl::StatusOr<Tensor> UnpackChunkTensor(const ChunkData& chunk, int index) {
  if (index < 0 || index >= chunk.data().tensors_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Chunk ", chunk.chunk_key(), " has no tensor ", index, "."));
  }
  REVERB_ASSIGN_OR_RETURN(Tensor tensor,
                          DecompressTensorFromProto(chunk.data().tensors(index)));
  if (chunk.delta_encoded()) DeltaEncode(&tensor, /*encode=*/false);
  return tensor;
}

absl::StatusOr<Sample> UnpackSample(SampleInfo info,
                                    absl::Span<const ChunkData* const> chunks) {
  ChunkTensors tensors(chunks);
  Sample sample;
  const FlatTrajectory& trajectory = info.item().flat_trajectory();
  for (const auto& column : trajectory.columns()) {
    std::vector<Tensor> pieces;
    for (const auto& slice : column.chunk_slices()) {
      REVERB_ASSIGN_OR_RETURN(const Tensor* tensor,
                              tensors.Get(slice.chunk_key(), slice.index()));
      if (slice.offset() == 0 && slice.length() == tensor->NumRows() &&
          !tensor->shape.empty()) {
        pieces.push_back(*tensor);
      } else {
        REVERB_ASSIGN_OR_RETURN(
            Tensor piece, SliceRows(*tensor, slice.offset(), slice.length()));
        pieces.push_back(std::move(piece));
      }
    }
    REVERB_ASSIGN_OR_RETURN(Tensor joined, ConcatRows(std::move(pieces)));
    if (column.squeeze()) {
      if (joined.NumRows() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "A squeezed column must have one row, got ", DescribeTensor(joined),
            "."));
      }
      joined.shape.erase(joined.shape.begin());
    }
    sample.columns.push_back(std::move(joined));
  }
  sample.info = std::move(info);
  return sample;
}

absl::StatusOr<Sample> UnpackSample(PackedSample packed) {
  std::vector<const ChunkData*> pointers;
  pointers.reserve(packed.chunks.size());
  for (const auto& chunk : packed.chunks) pointers.push_back(&chunk);
  return UnpackSample(std::move(packed.info), pointers);
}

absl::StatusOr<int64_t> NumTimesteps(const Sample& sample) {
  const auto& columns = sample.info.item().flat_trajectory().columns();
  int64_t steps = -1;
  for (int i = 0; i < static_cast<int>(sample.columns.size()); ++i) {
    const bool squeezed = i < columns.size() && columns[i].squeeze();
    const int64_t rows =
        sample.columns[i].shape.empty() || squeezed ? -2
                                                    : sample.columns[i].shape[0];
    if (rows < 0 || (steps >= 0 && rows != steps)) {
      return absl::InvalidArgumentError(
          "Can't split non timestep trajectory into timesteps.");
    }
    steps = rows;
  }
  return steps < 0 ? 0 : steps;
}

absl::StatusOr<std::vector<Tensor>> GetTimestep(const Sample& sample,
                                                int64_t step) {
  REVERB_ASSIGN_OR_RETURN(const int64_t steps, NumTimesteps(sample));
  if (step < 0 || step >= steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("Timestep ", step, " is out of range [0, ", steps, ")."));
  }
  std::vector<Tensor> out;
  out.reserve(sample.columns.size());
  for (const Tensor& column : sample.columns) {
    REVERB_ASSIGN_OR_RETURN(Tensor row, GetRow(column, step));
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace deepmind::reverb
