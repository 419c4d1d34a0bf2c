#include "cc/client/sample.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "cc/support/buffer_pool.h"
#include "cc/support/shm_segment.h"
#include "cc/support/status_macros.h"
#include "cc/tensor/compression.h"
#include "cc/tensor/snappy_decode.h"

namespace deepmind::reverb {
namespace {

// The index in `chunks` of the chunk whose key is `key` (the last, if a
// response carried it twice); -1 if there is none.
int FindChunk(absl::Span<const ChunkData* const> chunks, uint64_t key) {
  for (int i = static_cast<int>(chunks.size()) - 1; i >= 0; --i) {
    if (chunks[i]->chunk_key() == key) return i;
  }
  return -1;
}

// Copies bytes [at, at + n) of `content` (which holds them) to `out`.
void CopyPieces(const absl::Cord& content, size_t at, char* out, size_t n) {
  for (absl::string_view piece : content.Chunks()) {
    if (n == 0) return;
    if (at >= piece.size()) {
      at -= piece.size();
      continue;
    }
    const size_t take = std::min(n, piece.size() - at);
    std::memcpy(out, piece.data() + at, take);
    out += take;
    n -= take;
    at = 0;
  }
}

// Where a chunk tensor's (compressed) content lies, and reading it from
// there: from memory; from the file of a shared-memory segment whose mapping
// holds it (ReadSegment: the mapping's pages are not faulted in); or from the
// pieces gRPC received it in (ChunkContents::pieces).
class ContentSource {
 public:
  // Tensor `index`'s content: in `contents` (which must have it) if not
  // null, else in `proto`.
  ContentSource(const tensorflow::TensorProto& proto,
                const ChunkContents* contents, int index)
      : contents_(contents) {
    if (contents == nullptr) {
      content_ = proto.tensor_content();
      return;
    }
    content_ = contents->views[index];
    if (index < static_cast<int>(contents->pieces.size())) {
      pieces_ = contents->pieces[index];
    }
    if (!contents->segment.empty() && content_.data() >= contents->base &&
        content_.data() + content_.size() <= contents->base + contents->size) {
      in_file_ = static_cast<size_t>(content_.data() - contents->base);
    }
  }

  // Whether the content is read from memory (not from a file or pieces).
  bool InMemory() const { return pieces_ == nullptr && !in_file_.has_value(); }

  // Where the content stores a tensor of `length` bytes uncompressed
  // (SnappyStoredOffset): the offset of those bytes in it; nullopt if it is
  // compressed.
  std::optional<size_t> StoredOffset(size_t length) const {
    size_t offset = 0;
    const bool stored = pieces_ != nullptr
                            ? SnappyStoredOffset(*pieces_, length, &offset)
                            : SnappyStoredOffset(content_, length, &offset);
    if (!stored) return std::nullopt;
    return offset;
  }

  // Copies bytes [at, at + n) of the content (which holds them) to `out`.
  absl::Status Read(size_t at, char* out, size_t n) const {
    if (pieces_ != nullptr) {
      CopyPieces(*pieces_, at, out, n);
    } else if (in_file_.has_value()) {
      return ReadSegment(contents_->segment, *in_file_ + at, out, n);
    } else {
      std::memcpy(out, content_.data() + at, n);
    }
    return absl::OkStatus();
  }

  // The content as one view: its own, or a copy kept in `*flat` where it is
  // in pieces.
  absl::string_view Flat(std::string* flat) const {
    if (pieces_ == nullptr) return content_;
    *flat = std::string(*pieces_);
    return *flat;
  }

 private:
  const ChunkContents* contents_;
  absl::string_view content_;  // Empty where the content is in pieces.
  const absl::Cord* pieces_ = nullptr;
  std::optional<size_t> in_file_;  // The content's offset in the file.
};

// DecompressNumericInto, reading the content from `source`.
absl::Status DecompressInto(const TensorView& described,
                            const ContentSource& source, char* out,
                            size_t length) {
  if (std::optional<size_t> offset = source.StoredOffset(length)) {
    return source.Read(*offset, out, length);
  }
  std::string flat;
  return DecompressNumericInto(described, source.Flat(&flat), out, length);
}

// If `source` holds a tensor of `length` bytes stored uncompressed
// (SnappyStoredOffset): copies its bytes [skip, skip + n) to `out` and
// returns true; false (and nothing copied) otherwise. Rows of a chunk tensor
// are read so without decompressing the whole tensor apart.
absl::StatusOr<bool> CopyStoredBytes(const ContentSource& source, size_t length,
                                     size_t skip, char* out, size_t n) {
  if (skip > length || n > length - skip) return false;
  std::optional<size_t> offset = source.StoredOffset(length);
  if (!offset.has_value()) return false;
  REVERB_RETURN_IF_ERROR(source.Read(*offset + skip, out, n));
  return true;
}

// DecompressTensorFromProto, reading the content from `source`. (A stored
// content in memory is left to the decoder, which copies it as fast.)
absl::StatusOr<Tensor> DecompressTensor(const tensorflow::TensorProto& proto,
                                        const ContentSource& source) {
  if (!source.InMemory()) {
    Tensor tensor;
    tensor.dtype = proto.dtype();
    absl::StatusOr<int> element_size = DataTypeSize(tensor.dtype);
    if (!tensor.IsString() && element_size.ok() &&
        ShapeFromProto(proto, &tensor.shape).ok()) {
      const size_t length =
          static_cast<size_t>(tensor.NumElements()) * *element_size;
      if (std::optional<size_t> offset = source.StoredOffset(length)) {
        tensor.bytes = BufferPool::Default().Take(length);
        REVERB_RETURN_IF_ERROR(
            source.Read(*offset, tensor.bytes.data(), length));
        return tensor;
      }
    }
  }
  std::string flat;
  return DecompressTensorFromProto(proto, source.Flat(&flat));
}

// Decompresses each (chunk, tensor index) a sample uses once, and hands the
// tensor over without a copy to the last slice that uses it. A sample has
// few chunks: linear searches in small inline vectors beat hash maps here.
class ChunkTensors {
 public:
  ChunkTensors(absl::Span<const ChunkData* const> chunks,
               absl::Span<const ChunkContents* const> contents,
               const FlatTrajectory& trajectory)
      : chunks_(chunks), contents_(contents) {
    // Every entry is made here: Take() finds them and adds none, so
    // references into entries_ stay valid.
    for (const auto& column : trajectory.columns()) {
      for (const auto& slice : column.chunk_slices()) {
        ++Find(slice.chunk_key(), slice.index()).uses;
      }
    }
  }

  // The tensor of `slice`, its rows [offset, offset + length).
  // INVALID_ARGUMENT once the slices taken hold more than the sample may
  // unpack to (see UnpackSample).
  absl::StatusOr<Tensor> Take(const FlatTrajectory::ChunkSlice& slice) {
    Entry& entry = Find(slice.chunk_key(), slice.index());
    if (!entry.decoded) {
      const int i = FindChunk(chunks_, entry.key);
      if (i < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Sample references chunk ", entry.key, " it did not carry."));
      }
      const ChunkData* chunk = chunks_[i];
      const ChunkContents* contents =
          i < static_cast<int>(contents_.size()) ? contents_[i] : nullptr;
      REVERB_ASSIGN_OR_RETURN(entry.tensor,
                              UnpackChunkTensor(*chunk, entry.index, contents));
      entry.decoded = true;
      allowed_bytes_ += kMaxSampleExpansion * HeldBytes(entry.tensor);
    }
    const bool last_use = --entry.uses == 0;
    const Tensor& tensor = entry.tensor;
    Tensor taken;
    if (slice.offset() == 0 && slice.length() == tensor.NumRows() &&
        !tensor.shape.empty()) {
      // Not `last_use ? std::move(entry.tensor) : tensor`: that conditional
      // is a const prvalue, which `taken` would copy, not move from.
      if (last_use) {
        taken = std::move(entry.tensor);
      } else {
        taken = tensor;
      }
    } else {
      REVERB_ASSIGN_OR_RETURN(
          taken, SliceRows(tensor, slice.offset(), slice.length()));
    }
    taken_bytes_ += HeldBytes(taken);
    if (taken_bytes_ > allowed_bytes_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Sample's slices hold more than ", kMaxSampleExpansion,
          " times the chunk tensors they reference (", taken_bytes_,
          " bytes so far): the server sent a broken sample."));
    }
    return taken;
  }

 private:
  struct Entry {
    uint64_t key;
    int index;
    int uses = 0;
    bool decoded = false;
    Tensor tensor;
  };

  Entry& Find(uint64_t key, int index) {
    for (Entry& entry : entries_) {
      if (entry.key == key && entry.index == index) return entry;
    }
    return entries_.emplace_back(Entry{key, index});
  }

  // What a tensor holds in memory.
  static int64_t HeldBytes(const Tensor& tensor) {
    int64_t bytes = static_cast<int64_t>(tensor.bytes.size());
    for (const std::string& s : tensor.strings) {
      bytes += static_cast<int64_t>(sizeof(s) + s.size());
    }
    return bytes;
  }

  const absl::Span<const ChunkData* const> chunks_;
  const absl::Span<const ChunkContents* const> contents_;
  absl::InlinedVector<Entry, 4> entries_;
  int64_t allowed_bytes_ = kSampleExpansionAllowance;
  int64_t taken_bytes_ = 0;
};

}  // namespace

ChunkContents& HeldChunkContents::Hold(const ChunkData* chunk,
                                       std::vector<absl::Cord> pieces) {
  ChunkContents& held = contents[chunk];
  held.views.clear();
  held.pieces.clear();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const absl::Cord& kept = this->pieces.emplace_back(std::move(pieces[i]));
    if (absl::optional<absl::string_view> flat = kept.TryFlat()) {
      held.views.push_back(*flat);
    } else {
      held.views.emplace_back();
      held.pieces.resize(pieces.size(), nullptr);
      held.pieces[i] = &kept;
    }
  }
  return held;
}

absl::StatusOr<Tensor> UnpackChunkTensor(const ChunkData& chunk, int index,
                                         const ChunkContents* contents) {
  if (index < 0 || index >= chunk.data().tensors_size() ||
      (contents != nullptr &&
       index >= static_cast<int>(contents->views.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Chunk ", chunk.chunk_key(), " has no tensor ", index, "."));
  }
  const tensorflow::TensorProto& proto = chunk.data().tensors(index);
  REVERB_ASSIGN_OR_RETURN(
      Tensor tensor,
      DecompressTensor(proto, ContentSource(proto, contents, index)));
  if (chunk.delta_encoded()) DeltaEncode(&tensor, /*encode=*/false);
  return tensor;
}

absl::StatusOr<Sample> UnpackSample(
    std::shared_ptr<const SampleInfo> info,
    absl::Span<const ChunkData* const> chunks,
    absl::Span<const ChunkContents* const> contents) {
  if (info == nullptr) {
    return absl::InvalidArgumentError("The sample has no info.");
  }
  const FlatTrajectory& trajectory = info->item().flat_trajectory();
  ChunkTensors tensors(chunks, contents, trajectory);
  Sample sample;
  sample.columns.reserve(trajectory.columns_size());
  for (const auto& column : trajectory.columns()) {
    Tensor joined;
    if (column.chunk_slices_size() == 1) {  // The common case: no concat.
      REVERB_ASSIGN_OR_RETURN(joined, tensors.Take(column.chunk_slices(0)));
    } else {
      std::vector<Tensor> pieces;
      pieces.reserve(column.chunk_slices_size());
      for (const auto& slice : column.chunk_slices()) {
        REVERB_ASSIGN_OR_RETURN(Tensor piece, tensors.Take(slice));
        pieces.push_back(std::move(piece));
      }
      REVERB_ASSIGN_OR_RETURN(joined, ConcatRows(std::move(pieces)));
    }
    if (column.squeeze()) {
      if (joined.NumRows() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("A squeezed column must have one row, got ",
                         DescribeTensor(joined), "."));
      }
      joined.shape.erase(joined.shape.begin());
    }
    sample.columns.push_back(std::move(joined));
  }
  sample.info = std::move(info);
  return sample;
}

absl::StatusOr<Sample> UnpackSample(PackedSample packed) {
  return UnpackSample(std::move(packed.info), packed.chunks, packed.contents);
}

namespace {

// The header of the tensor a slice references, its shape and its
// (compressed) content; nullopt if the chunk or the tensor is missing or its
// shape is bad.
struct SliceSource {
  const ChunkData* chunk;
  const ChunkContents* contents;
  const tensorflow::TensorProto* proto;
  absl::InlinedVector<int64_t, 4> shape;
  ContentSource content;
};

std::optional<SliceSource> FindSource(const PackedSample& packed,
                                      const FlatTrajectory::ChunkSlice& slice) {
  const int i = FindChunk(packed.chunks, slice.chunk_key());
  if (i < 0) return std::nullopt;
  const ChunkData* chunk = packed.chunks[i];
  const ChunkContents* contents = i < static_cast<int>(packed.contents.size())
                                      ? packed.contents[i]
                                      : nullptr;
  if (slice.index() < 0 || slice.index() >= chunk->data().tensors_size() ||
      (contents != nullptr &&
       slice.index() >= static_cast<int>(contents->views.size()))) {
    return std::nullopt;
  }
  const tensorflow::TensorProto& proto = chunk->data().tensors(slice.index());
  absl::InlinedVector<int64_t, 4> shape;
  if (!ShapeFromProto(proto, &shape).ok() || shape.empty()) {
    return std::nullopt;
  }
  return SliceSource{chunk, contents, &proto, std::move(shape),
                     ContentSource(proto, contents, slice.index())};
}

int64_t Product(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

bool PackedColumnShapes(const PackedSample& packed,
                        std::vector<ColumnShape>* shapes) {
  if (packed.info == nullptr) return false;
  const FlatTrajectory& trajectory = packed.info->item().flat_trajectory();
  shapes->resize(trajectory.columns_size());
  // The bound UnpackSample keeps (kMaxSampleExpansion): the columns' bytes
  // against those of the chunk tensors they reference, each counted once.
  absl::InlinedVector<std::pair<uint64_t, int>, 4> referenced;
  int64_t referenced_bytes = 0;
  int64_t column_bytes = 0;
  for (int c = 0; c < trajectory.columns_size(); ++c) {
    const auto& column = trajectory.columns(c);
    if (column.chunk_slices_size() == 0) return false;
    ColumnShape& out = (*shapes)[c];
    out.dtype = tensorflow::DT_INVALID;
    int64_t rows = 0;
    for (const auto& slice : column.chunk_slices()) {
      std::optional<SliceSource> source = FindSource(packed, slice);
      if (!source.has_value()) return false;
      const tensorflow::DataType dtype = source->proto->dtype();
      const absl::InlinedVector<int64_t, 4>& shape = source->shape;
      if (!DataTypeSize(dtype).ok() || slice.offset() < 0 ||
          slice.length() < 0 || slice.offset() > shape[0] - slice.length()) {
        return false;
      }
      if (out.dtype == tensorflow::DT_INVALID) {
        out.dtype = dtype;
        out.shape.assign(shape.begin(), shape.end());
      } else if (dtype != out.dtype ||
                 !std::equal(shape.begin() + 1, shape.end(),
                             out.shape.begin() + 1, out.shape.end())) {
        return false;
      }
      rows += slice.length();
      const std::pair<uint64_t, int> key(slice.chunk_key(), slice.index());
      if (!absl::c_linear_search(referenced, key)) {
        referenced.push_back(key);
        referenced_bytes += Product(shape) * *DataTypeSize(dtype);
      }
    }
    out.shape[0] = rows;
    column_bytes += Product(out.shape) * *DataTypeSize(out.dtype);
    if (column.squeeze()) {
      if (rows != 1) return false;
      out.shape.erase(out.shape.begin());
    }
  }
  return column_bytes <=
         kMaxSampleExpansion * referenced_bytes + kSampleExpansionAllowance;
}

absl::Status UnpackSampleInto(const PackedSample& packed, int64_t row,
                              absl::Span<Tensor> batch) {
  const auto& columns = packed.info->item().flat_trajectory().columns();
  if (static_cast<int>(batch.size()) != columns.size()) {
    return absl::InvalidArgumentError(
        "The batch has another number of columns than the sample.");
  }
  // Chunk tensors decompressed apart, each once.
  absl::InlinedVector<std::pair<std::pair<uint64_t, int>, Tensor>, 4> decoded;
  absl::Status status;
  for (int c = 0; c < columns.size() && status.ok(); ++c) {
    const auto& column = columns[c];
    Tensor& out = batch[c];
    if (out.IsString() || out.shape.empty() || row < 0 || row >= out.shape[0]) {
      return absl::InvalidArgumentError("The batch has no such row.");
    }
    const size_t row_bytes = out.bytes.size() / out.shape[0];
    char* dst = out.bytes.data() + row * row_bytes;
    char* const end = dst + row_bytes;
    for (const auto& slice : column.chunk_slices()) {
      std::optional<SliceSource> source = FindSource(packed, slice);
      if (!source.has_value() || source->proto->dtype() != out.dtype) {
        status = absl::InvalidArgumentError(
            "The batch does not have the sample's shapes.");
        break;
      }
      const absl::InlinedVector<int64_t, 4>& shape = source->shape;
      const size_t slice_row_bytes =
          Product(absl::MakeConstSpan(shape).subspan(1)) *
          *DataTypeSize(out.dtype);
      const size_t bytes = slice.length() * slice_row_bytes;
      if (slice.offset() < 0 || slice.length() < 0 ||
          slice.offset() > shape[0] - slice.length() ||
          bytes > static_cast<size_t>(end - dst)) {
        status = absl::InvalidArgumentError(
            "The batch does not have the sample's shapes.");
        break;
      }
      if (column.chunk_slices_size() == 1 && slice.offset() == 0 &&
          slice.length() == shape[0] && !source->chunk->delta_encoded()) {
        TensorView described;
        described.dtype = out.dtype;
        described.shape.assign(shape.begin(), shape.end());
        status = DecompressInto(described, source->content, dst, bytes);
        if (!status.ok()) break;
        dst += bytes;
        continue;
      }
      if (!source->chunk->delta_encoded()) {
        absl::StatusOr<bool> copied =
            CopyStoredBytes(source->content, shape[0] * slice_row_bytes,
                            slice.offset() * slice_row_bytes, dst, bytes);
        if (!copied.ok()) {
          status = copied.status();
          break;
        }
        if (*copied) {
          dst += bytes;
          continue;
        }
      }
      const std::pair<uint64_t, int> key(slice.chunk_key(), slice.index());
      Tensor* whole = nullptr;
      for (auto& [k, tensor] : decoded) {
        if (k == key) whole = &tensor;
      }
      if (whole == nullptr) {
        auto unpacked =
            UnpackChunkTensor(*source->chunk, slice.index(), source->contents);
        if (!unpacked.ok()) {
          status = unpacked.status();
          break;
        }
        whole = &decoded.emplace_back(key, *std::move(unpacked)).second;
      }
      if (whole->bytes.size() != shape[0] * slice_row_bytes) {
        status = absl::InvalidArgumentError(
            "The batch does not have the sample's shapes.");
        break;
      }
      std::memcpy(dst, whole->bytes.data() + slice.offset() * slice_row_bytes,
                  bytes);
      dst += bytes;
    }
    if (status.ok() && dst != end) {
      status = absl::InvalidArgumentError(
          "The batch does not have the sample's shapes.");
    }
  }
  for (auto& entry : decoded) {
    BufferPool::Default().Give(std::move(entry.second.bytes));
  }
  return status;
}

void RecycleSample(Sample* sample) {
  for (Tensor& column : sample->columns) {
    BufferPool::Default().Give(std::move(column.bytes));
  }
  sample->columns.clear();
}

absl::StatusOr<int64_t> NumTimesteps(const Sample& sample) {
  const auto& columns = sample.info->item().flat_trajectory().columns();
  int64_t steps = -1;
  for (int i = 0; i < static_cast<int>(sample.columns.size()); ++i) {
    const bool squeezed = i < columns.size() && columns[i].squeeze();
    const int64_t rows = sample.columns[i].shape.empty() || squeezed
                             ? -2
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
