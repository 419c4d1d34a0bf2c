#include "cc/wire/chunk_rows.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cc/tensor/compression.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

constexpr int kRows = 4;
constexpr int64_t kRowBytes = 12 << 10;

// Rows of random bytes (stored, not compressed, by CompressTensorAsProto),
// or of one repeated byte (compressed).
Tensor Rows(int64_t rows, int64_t row_bytes, uint32_t seed,
            bool compressible = false) {
  Tensor tensor;
  tensor.dtype = tensorflow::DT_UINT8;
  tensor.shape = {rows, row_bytes};
  std::mt19937 random(seed);
  tensor.bytes.resize(rows * row_bytes);
  for (char& c : tensor.bytes) {
    c = compressible ? 'c' : static_cast<char>(random());
  }
  return tensor;
}

// A chunk of `tensors` (rows [10, 10 + kRows) of episode 7), kept as bytes
// as the server keeps a chunk it received.
std::shared_ptr<Chunk> MakeChunk(const std::vector<Tensor>& tensors,
                                 bool delta = false, bool sparse = false) {
  ChunkData data;
  data.set_chunk_key(42);
  data.set_data_tensors_len(static_cast<int>(tensors.size()));
  data.set_delta_encoded(delta);
  auto* range = data.mutable_sequence_range();
  range->set_episode_id(7);
  range->set_start(10);
  range->set_end(10 + kRows - 1);
  range->set_sparse(sparse);
  int64_t size = 0;
  for (const Tensor& tensor : tensors) {
    EXPECT_TRUE(
        CompressTensorAsProto(tensor, data.mutable_data()->add_tensors()).ok());
    size += static_cast<int64_t>(tensor.bytes.size());
  }
  data.set_data_uncompressed_size(size);
  return *Chunk::Parse(absl::Cord(data.SerializeAsString()));
}

ChunkData ParseTrimmed(const absl::Cord& trimmed) {
  ChunkData data;
  EXPECT_TRUE(data.ParseFromString(std::string(trimmed)));
  return data;
}

TEST(ChunkRowsTest, RowsReadSpanTheSlicesOfTheChunkInEveryColumn) {
  FlatTrajectory trajectory;
  auto add = [&](int column, uint64_t key, int offset, int length) {
    while (trajectory.columns_size() <= column) trajectory.add_columns();
    auto* slice = trajectory.mutable_columns(column)->add_chunk_slices();
    slice->set_chunk_key(key);
    slice->set_offset(offset);
    slice->set_length(length);
  };
  add(0, 1, 3, 2);  // Rows 3-4 of chunk 1,
  add(0, 2, 0, 1);  // then chunk 2.
  add(1, 1, 1, 1);  // Row 1 of chunk 1.
  const RowRange one = RowsRead(trajectory, 1);
  EXPECT_EQ(one.first, 1);
  EXPECT_EQ(one.count, 4);
  const RowRange two = RowsRead(trajectory, 2);
  EXPECT_EQ(two.first, 0);
  EXPECT_EQ(two.count, 1);
  EXPECT_EQ(RowsRead(trajectory, 3).count, 0);
}

TEST(ChunkRowsTest, TrimmedChunksHoldTheRowsAsStoredWithoutCopies) {
  const std::vector<Tensor> tensors = {Rows(kRows, kRowBytes, 1),
                                       Rows(kRows, kRowBytes / 4, 2)};
  auto chunk = MakeChunk(tensors);
  std::optional<absl::Cord> trimmed = TrimChunk(*chunk, RowRange{1, 2});
  ASSERT_TRUE(trimmed.has_value());
  const ChunkData data = ParseTrimmed(*trimmed);
  EXPECT_EQ(data.chunk_key(), 42);
  EXPECT_EQ(data.first_row(), 1);
  EXPECT_EQ(data.data_tensors_len(), 2);
  EXPECT_EQ(data.sequence_range().episode_id(), 7);
  EXPECT_EQ(data.sequence_range().start(), 11);
  EXPECT_EQ(data.sequence_range().end(), 12);
  EXPECT_EQ(data.data_uncompressed_size(), 2 * (kRowBytes + kRowBytes / 4));
  ASSERT_EQ(data.data().tensors_size(), 2);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Tensor> rows =
        DecompressTensorFromProto(data.data().tensors(i));
    ASSERT_TRUE(rows.ok()) << rows.status();
    const int64_t row_bytes = tensors[i].shape[1];
    EXPECT_EQ(rows->shape, (std::vector<int64_t>{2, row_bytes}));
    EXPECT_EQ(rows->bytes, tensors[i].bytes.substr(row_bytes, 2 * row_bytes));
  }
  // The large rows are the chunk's own bytes.
  const std::string rows = tensors[0].bytes.substr(kRowBytes, 2 * kRowBytes);
  bool shared = false;
  const absl::string_view flat = *chunk->wire().TryFlat();
  for (absl::string_view piece : trimmed->Chunks()) {
    if (piece.size() >= kRowBytes && piece.data() >= flat.data() &&
        piece.data() + piece.size() <= flat.data() + flat.size()) {
      shared = piece == rows;
    }
  }
  EXPECT_TRUE(shared);
}

TEST(ChunkRowsTest, ChunksKeptAsProtosAreTrimmedAlike) {
  const std::vector<Tensor> tensors = {Rows(kRows, kRowBytes, 1)};
  auto bytes = MakeChunk(tensors);
  auto shared =
      std::make_shared<ChunkData>(ParseTrimmed(absl::Cord(bytes->Serialize())));
  auto proto = Chunk::Share(shared);
  std::optional<absl::Cord> from_bytes = TrimChunk(*bytes, RowRange{2, 1});
  std::optional<absl::Cord> from_proto = TrimChunk(*proto, RowRange{2, 1});
  ASSERT_TRUE(from_bytes.has_value() && from_proto.has_value());
  EXPECT_EQ(ParseTrimmed(*from_proto).SerializeAsString(),
            ParseTrimmed(*from_bytes).SerializeAsString());
  // The rows are the proto's content.
  const std::string& content = shared->data().tensors(0).tensor_content();
  bool borrowed = false;
  for (absl::string_view piece : from_proto->Chunks()) {
    borrowed |= piece.size() == kRowBytes && piece.data() >= content.data() &&
                piece.data() < content.data() + content.size();
  }
  EXPECT_TRUE(borrowed);
}

TEST(ChunkRowsTest, ChunksThatCannotBeTrimmedAsStoredAreNot) {
  const Tensor stored = Rows(kRows, kRowBytes, 1);
  // Every row, or rows sparing too little.
  EXPECT_FALSE(TrimChunk(*MakeChunk({stored}), RowRange{0, kRows}));
  EXPECT_FALSE(TrimChunk(*MakeChunk({Rows(kRows, 1024, 1)}), RowRange{0, 1}));
  // Out of range.
  EXPECT_FALSE(TrimChunk(*MakeChunk({stored}), RowRange{3, 2}));
  EXPECT_FALSE(TrimChunk(*MakeChunk({stored}), RowRange{-1, 2}));
  // A compressed tensor (even beside a stored one), delta encoding, sparse
  // steps.
  EXPECT_FALSE(TrimChunk(
      *MakeChunk({stored, Rows(kRows, kRowBytes, 2, /*compressible=*/true)}),
      RowRange{0, 1}));
  EXPECT_FALSE(TrimChunk(*MakeChunk({stored}, /*delta=*/true), RowRange{0, 1}));
  EXPECT_FALSE(
      TrimChunk(*MakeChunk({stored}, false, /*sparse=*/true), RowRange{0, 1}));
  // A chunk kept as a proto (an in-process writer's) with a field this
  // does not know.
  ChunkData data = ParseTrimmed(absl::Cord(MakeChunk({stored})->Serialize()));
  data.mutable_data()->mutable_tensors(0)->add_half_val(1);
  EXPECT_FALSE(
      TrimChunk(*Chunk::Share(std::make_shared<ChunkData>(std::move(data))),
                RowRange{0, 1}));
  // Strings.
  Tensor strings;
  strings.dtype = tensorflow::DT_STRING;
  strings.shape = {kRows};
  strings.strings.assign(kRows, std::string(kRowBytes, 's'));
  EXPECT_FALSE(TrimChunk(*MakeChunk({strings}), RowRange{0, 1}));
}

TEST(ChunkRowsTest, UntrimSlicesCountsFromTheRowsSent) {
  FlatTrajectory trajectory;
  for (int column = 0; column < 2; ++column) {
    auto* slices = trajectory.add_columns();
    auto* trimmed = slices->add_chunk_slices();
    trimmed->set_chunk_key(1);
    trimmed->set_offset(5 + column);
    trimmed->set_length(1);
    auto* whole = slices->add_chunk_slices();
    whole->set_chunk_key(2);
    whole->set_offset(3);
    whole->set_length(1);
  }
  ChunkData one, two, again;
  one.set_chunk_key(1);
  one.set_first_row(4);
  two.set_chunk_key(2);
  again.set_chunk_key(1);
  again.set_first_row(5);
  UntrimSlices({&two}, &trajectory);  // Nothing trimmed.
  EXPECT_EQ(trajectory.columns(0).chunk_slices(0).offset(), 5);
  UntrimSlices({&one, &two}, &trajectory);
  EXPECT_EQ(trajectory.columns(0).chunk_slices(0).offset(), 1);
  EXPECT_EQ(trajectory.columns(1).chunk_slices(0).offset(), 2);
  EXPECT_EQ(trajectory.columns(0).chunk_slices(1).offset(), 3);
  // Of a key given twice, the last chunk counts (as the sampler reads);
  // an offset moved out of range (a broken server's rows) becomes -1,
  // which unpacking refuses, without overflowing.
  UntrimSlices({&one, &again}, &trajectory);
  EXPECT_EQ(trajectory.columns(0).chunk_slices(0).offset(), -1);
  EXPECT_EQ(trajectory.columns(1).chunk_slices(0).offset(), -1);
  ChunkData hostile;
  hostile.set_chunk_key(2);
  hostile.set_first_row(std::numeric_limits<int32_t>::min());
  UntrimSlices({&hostile}, &trajectory);
  EXPECT_EQ(trajectory.columns(0).chunk_slices(1).offset(), -1);
}

}  // namespace
}  // namespace deepmind::reverb
