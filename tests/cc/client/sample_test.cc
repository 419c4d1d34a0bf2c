#include "cc/client/sample.h"

#include <array>
#include <string>
#include <vector>

#include "cc/tensor/compression.h"
#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::Int32;
using testing::Values;

// A chunk with one int32 column holding `first..first+rows-1`, shape [rows, 1].
ChunkData MakeChunk(uint64_t key, int32_t first, int32_t rows,
                    bool delta = false) {
  std::vector<int32_t> values(rows);
  for (int i = 0; i < rows; ++i) values[i] = first + i;
  Tensor t = Int32(values, {rows, 1});
  if (delta) DeltaEncode(&t, true);
  ChunkData chunk;
  chunk.set_chunk_key(key);
  chunk.set_delta_encoded(delta);
  EXPECT_TRUE(
      CompressTensorAsProto(t, chunk.mutable_data()->add_tensors()).ok());
  chunk.set_data_tensors_len(1);
  return chunk;
}

std::shared_ptr<SampleInfo> Info(
    std::vector<std::vector<std::array<int, 3>>> columns,
    std::vector<bool> squeeze = {}) {
  auto info = std::make_shared<SampleInfo>();
  for (size_t c = 0; c < columns.size(); ++c) {
    auto* column =
        info->mutable_item()->mutable_flat_trajectory()->add_columns();
    column->set_squeeze(c < squeeze.size() && squeeze[c]);
    for (const auto& [key, offset, length] : columns[c]) {
      auto* slice = column->add_chunk_slices();
      slice->set_chunk_key(key);
      slice->set_offset(offset);
      slice->set_length(length);
    }
  }
  return info;
}

TEST(SampleTest, ConcatenatesSlicesAcrossChunks) {
  ChunkData a = MakeChunk(1, 0, 4);
  ChunkData b = MakeChunk(2, 4, 4, /*delta=*/true);
  std::vector<const ChunkData*> chunks = {&a, &b};
  auto sample = UnpackSample(Info({{{1, 2, 2}, {2, 0, 3}}}), chunks);
  ASSERT_TRUE(sample.ok()) << sample.status();
  ASSERT_EQ(sample->columns.size(), 1);
  EXPECT_EQ(sample->columns[0].shape, (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(Values<int32_t>(sample->columns[0]),
            (std::vector<int32_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(*NumTimesteps(*sample), 5);
  auto step = GetTimestep(*sample, 3);
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(Values<int32_t>((*step)[0]), (std::vector<int32_t>{5}));
}

TEST(SampleTest, SqueezedColumnDropsTimeDimension) {
  ChunkData a = MakeChunk(1, 10, 3);
  std::vector<const ChunkData*> chunks = {&a};
  auto sample =
      UnpackSample(Info({{{1, 1, 1}}, {{1, 0, 3}}}, {true, false}), chunks);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->columns[0].shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(Values<int32_t>(sample->columns[0]), (std::vector<int32_t>{11}));
  EXPECT_EQ(NumTimesteps(*sample).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SampleTest, UnequalColumnsCannotBeSplit) {
  ChunkData a = MakeChunk(1, 0, 3);
  std::vector<const ChunkData*> chunks = {&a};
  auto sample = UnpackSample(Info({{{1, 0, 1}}, {{1, 0, 2}}}), chunks);
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(NumTimesteps(*sample).status().message(),
            "Can't split non timestep trajectory into timesteps.");
}

TEST(SampleTest, BadReferencesAreErrors) {
  ChunkData a = MakeChunk(1, 0, 3);
  std::vector<const ChunkData*> chunks = {&a};
  EXPECT_FALSE(UnpackSample(Info({{{2, 0, 1}}}), chunks).ok());  // No chunk.
  EXPECT_FALSE(UnpackSample(Info({{{1, 2, 2}}}), chunks).ok());  // Rows.
  EXPECT_FALSE(UnpackSample(nullptr, chunks).ok());
  std::shared_ptr<SampleInfo> bad_index = Info({{{1, 0, 1}}});
  bad_index->mutable_item()
      ->mutable_flat_trajectory()
      ->mutable_columns(0)
      ->mutable_chunk_slices(0)
      ->set_index(3);
  EXPECT_FALSE(UnpackSample(bad_index, chunks).ok());
}

TEST(SampleTest, OverlappingSlicesUnpackUpToTheBound) {
  // Observation and next observation: two columns over one chunk's rows.
  ChunkData a = MakeChunk(1, 0, 4);
  std::vector<const ChunkData*> chunks = {&a};
  auto sample = UnpackSample(Info({{{1, 0, 3}}, {{1, 1, 3}}}), chunks);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(Values<int32_t>(sample->columns[0]),
            (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(Values<int32_t>(sample->columns[1]),
            (std::vector<int32_t>{1, 2, 3}));

  // A 256 KiB tensor, taken kMaxSampleExpansion times whole: the most
  // allowed.
  const int32_t rows = 1 << 16;
  ChunkData big = MakeChunk(2, 0, rows);
  chunks = {&big};
  std::vector<std::array<int, 3>> whole(kMaxSampleExpansion, {2, 0, rows});
  sample = UnpackSample(Info({whole}), chunks);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->columns[0].shape,
            (std::vector<int64_t>{kMaxSampleExpansion * rows, 1}));
}

TEST(SampleTest, SlicesThatRepeatTheirTensorsBeyondTheBoundAreRefused) {
  // A hostile server's sample: a 256 KiB tensor (delta-encoded and
  // compressed to a few KiB) and 20,000 slices of all of it, in a response
  // of about 200 KiB that would unpack to 5 GiB.
  const int32_t rows = 1 << 16;
  ChunkData big = MakeChunk(1, 0, rows, /*delta=*/true);
  std::vector<const ChunkData*> chunks = {&big};
  std::shared_ptr<SampleInfo> info =
      Info({std::vector<std::array<int, 3>>(20'000, {1, 0, rows})});
  ASSERT_LT(info->ByteSizeLong() + big.ByteSizeLong(), 300 << 10);
  auto sample = UnpackSample(info, chunks);
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sample.status().message().find("times the chunk tensors"),
            std::string::npos)
      << sample.status();

  // Across columns too.
  std::vector<std::vector<std::array<int, 3>>> columns(2 * kMaxSampleExpansion,
                                                       {{1, 0, rows}});
  EXPECT_EQ(UnpackSample(Info(columns), chunks).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepmind::reverb
