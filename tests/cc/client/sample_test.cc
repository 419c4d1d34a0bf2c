#include "cc/client/sample.h"

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/cord.h"
#include "cc/core/chunk.h"
#include "cc/support/shm_segment.h"
#include "cc/tensor/compression.h"
#include "cc/tensor/snappy_decode.h"
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

// Unpacks the sample of `info` over `chunks` into row 1 of a 3-row batch of
// its shapes, whose other rows hold 0x5A bytes: the row must hold what
// UnpackSample makes, and the other rows stay as they were.
void ExpectUnpackedIntoARowAsUnpackSample(
    std::shared_ptr<SampleInfo> info, std::vector<const ChunkData*> chunks) {
  const PackedSample packed{info, {chunks.begin(), chunks.end()}, {}, {}};
  std::vector<ColumnShape> read;
  ASSERT_TRUE(PackedColumnShapes(packed, &read));
  const std::vector<ColumnShape>* shapes = &read;
  auto expected = UnpackSample(info, chunks);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(shapes->size(), expected->columns.size());
  std::vector<Tensor> batch;
  for (size_t c = 0; c < shapes->size(); ++c) {
    SCOPED_TRACE(c);
    const Tensor& column = expected->columns[c];
    EXPECT_EQ((*shapes)[c].dtype, column.dtype);
    EXPECT_EQ((*shapes)[c].shape, column.shape);
    Tensor& rows = batch.emplace_back();
    rows.dtype = column.dtype;
    rows.shape = column.shape;
    rows.shape.insert(rows.shape.begin(), 3);
    rows.bytes.assign(3 * column.bytes.size(), '\x5a');
  }
  const absl::Status unpacked =
      UnpackSampleInto(packed, 1, absl::MakeSpan(batch));
  ASSERT_TRUE(unpacked.ok()) << unpacked;
  for (size_t c = 0; c < batch.size(); ++c) {
    SCOPED_TRACE(c);
    const std::string& row = expected->columns[c].bytes;
    const std::string untouched(row.size(), '\x5a');
    EXPECT_EQ(batch[c].bytes.substr(0, row.size()), untouched);
    EXPECT_EQ(batch[c].bytes.substr(row.size(), row.size()), row);
    EXPECT_EQ(batch[c].bytes.substr(2 * row.size()), untouched);
  }
}

TEST(SampleTest, UnpackedIntoABatchRowAsUnpackSampleUnpacksIt) {
  ChunkData a = MakeChunk(1, 0, 4);
  ChunkData b = MakeChunk(2, 4, 4, /*delta=*/true);
  std::vector<const ChunkData*> chunks = {&a, &b};
  // A whole chunk tensor (decompressed straight into the row), a part of
  // one, slices across two chunks, a whole delta-encoded tensor, and a
  // squeezed row.
  ExpectUnpackedIntoARowAsUnpackSample(Info({{{1, 0, 4}},
                                             {{1, 1, 2}},
                                             {{1, 2, 2}, {2, 0, 3}},
                                             {{2, 0, 4}},
                                             {{1, 3, 1}}},
                                            {false, false, false, false, true}),
                                       chunks);
}

TEST(SampleTest, RowsOfStoredAndCompressedTensorsUnpackIntoABatchRow) {
  // Random rows (stored: snappy cannot shrink them) and a repeated pattern
  // (compressed), 64 rows of 3 each.
  std::vector<int32_t> random(64 * 3);
  const std::string bytes = testing::RandomBytes(random.size() * 4, 11);
  std::memcpy(random.data(), bytes.data(), bytes.size());
  std::vector<int32_t> pattern(64 * 3);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = i % 3;
  ChunkData stored;
  stored.set_chunk_key(1);
  ChunkData compressed;
  compressed.set_chunk_key(2);
  for (auto [chunk, values] :
       {std::pair(&stored, &random), std::pair(&compressed, &pattern)}) {
    ASSERT_TRUE(CompressTensorAsProto(Int32(*values, {64, 3}),
                                      chunk->mutable_data()->add_tensors())
                    .ok());
    chunk->set_data_tensors_len(1);
  }
  size_t offset = 0;
  ASSERT_TRUE(SnappyStoredOffset(stored.data().tensors(0).tensor_content(),
                                 bytes.size(), &offset));
  ASSERT_FALSE(SnappyStoredOffset(compressed.data().tensors(0).tensor_content(),
                                  bytes.size(), &offset));
  // Rows of each, the last rows of one followed by the first of the other,
  // and a squeezed row.
  ExpectUnpackedIntoARowAsUnpackSample(Info({{{1, 5, 7}},
                                             {{2, 9, 4}},
                                             {{1, 60, 4}, {2, 0, 2}},
                                             {{2, 62, 2}, {1, 0, 3}},
                                             {{1, 63, 1}}},
                                            {false, false, false, false, true}),
                                       {&stored, &compressed});
}

TEST(SampleTest, PackedColumnShapesLeaveOtherSamplesToUnpackSample) {
  ChunkData a = MakeChunk(1, 0, 3);
  ChunkData b = MakeChunk(2, 0, 3);
  b.mutable_data()->mutable_tensors(0)->set_dtype(tensorflow::DT_FLOAT);
  ChunkData strings;
  strings.set_chunk_key(3);
  ASSERT_TRUE(CompressTensorAsProto(testing::MakeStrings({2}, {"x", "y"}),
                                    strings.mutable_data()->add_tensors())
                  .ok());
  ChunkData big = MakeChunk(5, 0, 1 << 16);  // 256 KiB.
  std::vector<const ChunkData*> chunks = {&a, &b, &strings, &big};
  // One vector for every call, as a batch reads its samples' shapes.
  std::vector<ColumnShape> read;
  auto shapes = [&](std::shared_ptr<SampleInfo> info) {
    return PackedColumnShapes(
        PackedSample{info, {chunks.begin(), chunks.end()}, {}, {}}, &read);
  };
  EXPECT_TRUE(shapes(Info({{{1, 0, 3}}, {{2, 1, 2}}})));
  ASSERT_EQ(read.size(), 2);
  EXPECT_EQ(read[1], (ColumnShape{tensorflow::DT_FLOAT, {2, 1}}));
  EXPECT_TRUE(shapes(Info({{{1, 0, 3}}})));  // Fewer columns than before.
  EXPECT_EQ(read, (std::vector<ColumnShape>{{tensorflow::DT_INT32, {3, 1}}}));
  EXPECT_FALSE(shapes(nullptr));
  EXPECT_FALSE(shapes(Info({{{4, 0, 1}}})));             // No chunk.
  EXPECT_FALSE(shapes(Info({{{1, 2, 2}}})));             // Rows.
  EXPECT_FALSE(shapes(Info({{}})));                      // No slice.
  EXPECT_FALSE(shapes(Info({{{1, 0, 2}}}, {true})));     // Squeezed.
  EXPECT_FALSE(shapes(Info({{{1, 0, 1}, {2, 0, 1}}})));  // Dtypes.
  EXPECT_FALSE(shapes(Info({{{3, 0, 1}}})));             // Strings.
  // Up to the expansion bound, as UnpackSample.
  auto whole = [](int times) {
    return Info({std::vector<std::array<int, 3>>(times, {5, 0, 1 << 16})});
  };
  EXPECT_TRUE(shapes(whole(kMaxSampleExpansion)));
  EXPECT_FALSE(shapes(whole(kMaxSampleExpansion + 8)));
}

TEST(SampleTest, UnpackSampleIntoRefusesCorruptDataAndOtherShapes) {
  ChunkData a = MakeChunk(1, 0, 4);
  std::vector<const ChunkData*> chunks = {&a};
  const PackedSample packed{
      Info({{{1, 0, 4}}}), {chunks.begin(), chunks.end()}, {}, {}};
  auto batch_of = [](std::vector<int64_t> shape) {
    Tensor rows;
    rows.dtype = tensorflow::DT_INT32;
    rows.shape = shape;
    rows.bytes.assign(rows.NumElements() * 4, '\0');
    return std::vector<Tensor>{rows};
  };
  std::vector<Tensor> fits = batch_of({2, 4, 1});
  EXPECT_TRUE(UnpackSampleInto(packed, 1, absl::MakeSpan(fits)).ok());
  EXPECT_EQ(Values<int32_t>(fits[0]),
            (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 2, 3}));
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{2, 3, 1}, std::vector<int64_t>{2, 5, 1}}) {
    std::vector<Tensor> other = batch_of(shape);
    EXPECT_EQ(UnpackSampleInto(packed, 1, absl::MakeSpan(other)).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(UnpackSampleInto(packed, 2, absl::MakeSpan(fits)).code(),
            absl::StatusCode::kInvalidArgument);  // No such row.
  a.mutable_data()->mutable_tensors(0)->set_tensor_content("garbage");
  EXPECT_EQ(UnpackSampleInto(packed, 0, absl::MakeSpan(fits)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SampleTest, StoredContentsOfASegmentAreReadFromItsFile) {
  // 64Ki random int32 rows: snappy cannot shrink them, so they are stored.
  std::vector<int32_t> values(1 << 16);
  const std::string random = testing::RandomBytes(values.size() * 4, 7);
  std::memcpy(values.data(), random.data(), random.size());
  ChunkData chunk;
  chunk.set_chunk_key(1);
  ASSERT_TRUE(CompressTensorAsProto(Int32(values, {1 << 16, 1}),
                                    chunk.mutable_data()->add_tensors())
                  .ok());
  chunk.set_data_tensors_len(1);
  const std::string& content = chunk.data().tensors(0).tensor_content();
  size_t stored_at = 0;
  ASSERT_TRUE(SnappyStoredOffset(content, random.size(), &stored_at));

  // The segment holds the chunk; the mapping the views would point into
  // is stood in for by a copy whose stored bytes are zeroed: what is
  // unpacked says which of the two was read.
  const std::string segment = ServerPrefix(RandomToken());
  std::string wire = chunk.SerializeAsString();
  ASSERT_TRUE(WriteSegment(segment, {wire}).ok());
  absl::Cleanup remove = [&segment] { RemoveSegmentTree(segment); };
  const size_t at = wire.find(content);
  ASSERT_NE(at, std::string::npos);
  std::memset(wire.data() + at + stored_at, 0, random.size());
  const absl::Cord mapping = absl::MakeCordFromExternal(wire, [] {});
  const absl::optional<absl::string_view> flat = mapping.TryFlat();
  ASSERT_TRUE(flat.has_value());
  ChunkData header;
  std::vector<absl::Cord> pieces;
  ASSERT_TRUE(ParseChunkHeader(mapping, &header, &pieces).ok());
  ChunkContents contents;
  contents.views.push_back(*pieces[0].TryFlat());
  contents.base = flat->data();
  contents.size = flat->size();
  const ChunkContents* apart[] = {&contents};
  const ChunkData* chunks[] = {&header};
  auto info = Info({{{1, 0, 1 << 16}}, {{1, 5, 3}}});
  const std::vector<int32_t> part(values.begin() + 5, values.begin() + 8);

  // Without the file the views are read (zeros); with it, the file.
  auto from_views = UnpackSample(info, chunks, apart);
  ASSERT_TRUE(from_views.ok()) << from_views.status();
  EXPECT_EQ(Values<int32_t>(from_views->columns[0]),
            std::vector<int32_t>(values.size(), 0));
  contents.segment = segment;
  auto from_file = UnpackSample(info, chunks, apart);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(Values<int32_t>(from_file->columns[0]), values);
  EXPECT_EQ(Values<int32_t>(from_file->columns[1]), part);

  // Into a batch row: the whole tensor and the part's rows straight from
  // the file.
  const PackedSample packed{info, {&header}, {&contents}, {}};
  std::vector<Tensor> batch(2);
  batch[0].dtype = batch[1].dtype = tensorflow::DT_INT32;
  batch[0].shape = {1, 1 << 16, 1};
  batch[0].bytes.assign(random.size(), '\0');
  batch[1].shape = {1, 3, 1};
  batch[1].bytes.assign(12, '\0');
  ASSERT_TRUE(UnpackSampleInto(packed, 0, absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].bytes, random);
  EXPECT_EQ(Values<int32_t>(batch[1]), part);

  // A segment gone is an error, not a crash.
  RemoveSegmentTree(segment);
  EXPECT_FALSE(UnpackSample(info, chunks, apart).ok());
  EXPECT_FALSE(UnpackSampleInto(packed, 0, absl::MakeSpan(batch)).ok());
}

// A chunk of a large column and a scalar one (a legacy writer's step), as
// a segment holds it: the scalar's content is a piece of a few bytes, which
// a cord holds inline, apart from the mapping.
TEST(SampleTest, HeldContentsOfTinyTensorsAreReadWhereTheyAreKept) {
  std::vector<int32_t> values(1 << 14);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 3 * i + 1;
  ChunkData chunk;
  chunk.set_chunk_key(1);
  ASSERT_TRUE(CompressTensorAsProto(Int32(values, {1, 1 << 14}),
                                    chunk.mutable_data()->add_tensors())
                  .ok());
  ASSERT_TRUE(CompressTensorAsProto(Int32({-7}, {1}),
                                    chunk.mutable_data()->add_tensors())
                  .ok());
  chunk.set_data_tensors_len(2);
  const std::string segment = ServerPrefix(RandomToken());
  const std::string wire = chunk.SerializeAsString();
  ASSERT_TRUE(WriteSegment(segment, {wire}).ok());
  absl::Cleanup remove = [&segment] { RemoveSegmentTree(segment); };

  HeldChunkContents held;
  ChunkData header;
  {
    const absl::Cord mapping = absl::MakeCordFromExternal(wire, [] {});
    std::vector<absl::Cord> pieces;
    ASSERT_TRUE(ParseChunkHeader(mapping, &header, &pieces).ok());
    ASSERT_EQ(pieces.size(), 2);
    ChunkContents& contents = held.Hold(&header, std::move(pieces));
    contents.segment = segment;
    contents.base = wire.data();
    contents.size = wire.size();
    // The pieces given and the cord they came from are gone; whatever
    // takes their memory next must not show through the views.
    std::vector<std::string> reuse(64, std::string(15, 'x'));
  }
  const ChunkContents* apart[] = {&held.contents.at(&header)};
  const ChunkData* chunks[] = {&header};
  auto info = Info({{{1, 0, 1}}, {{1, 0, 1}}});
  info->mutable_item()
      ->mutable_flat_trajectory()
      ->mutable_columns(1)
      ->mutable_chunk_slices(0)
      ->set_index(1);
  auto sample = UnpackSample(info, chunks, apart);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(Values<int32_t>(sample->columns[0]), values);
  EXPECT_EQ(Values<int32_t>(sample->columns[1]), std::vector<int32_t>{-7});
}

TEST(SampleTest, ContentsReceivedInPiecesUnpackAsTheirChunks) {
  // Stored (random) and compressed (random values below 16) tensors of 640
  // rows of 3, whose chunks arrive in pieces of 1,000 bytes, as gRPC
  // receives them (a cord copies pieces under 512 bytes together): their
  // contents are held in those pieces, not flattened.
  std::vector<int32_t> random(640 * 3);
  const std::string bytes = testing::RandomBytes(random.size() * 4, 12);
  std::memcpy(random.data(), bytes.data(), bytes.size());
  std::vector<int32_t> pattern(640 * 3);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = bytes[i] & 15;
  ChunkData stored = MakeChunk(1, 0, 1);
  ChunkData compressed = MakeChunk(2, 0, 1);
  for (auto [chunk, values] :
       {std::pair(&stored, &random), std::pair(&compressed, &pattern)}) {
    chunk->mutable_data()->clear_tensors();
    ASSERT_TRUE(CompressTensorAsProto(Int32(*values, {640, 3}),
                                      chunk->mutable_data()->add_tensors())
                    .ok());
  }
  size_t offset = 0;
  ASSERT_TRUE(SnappyStoredOffset(stored.data().tensors(0).tensor_content(),
                                 bytes.size(), &offset));
  ASSERT_FALSE(SnappyStoredOffset(compressed.data().tensors(0).tensor_content(),
                                  bytes.size(), &offset));
  const std::string wires[] = {stored.SerializeAsString(),
                               compressed.SerializeAsString()};
  HeldChunkContents held;
  ChunkData headers[2];
  std::vector<const ChunkContents*> contents;
  for (int i = 0; i < 2; ++i) {
    const absl::Cord received = testing::InPieces(wires[i], 1000);
    std::vector<absl::Cord> pieces;
    ASSERT_TRUE(ParseChunkHeader(received, &headers[i], &pieces).ok());
    const ChunkContents& held_contents =
        held.Hold(&headers[i], std::move(pieces));
    ASSERT_EQ(held_contents.pieces.size(), 1);
    ASSERT_NE(held_contents.pieces[0], nullptr);
    EXPECT_TRUE(held_contents.views[0].empty());
    contents.push_back(&held_contents);
  }
  // Whole tensors, rows of each, rows across the two, a squeezed row.
  auto info = Info({{{1, 0, 640}},
                    {{2, 0, 640}},
                    {{1, 5, 70}},
                    {{2, 9, 400}},
                    {{1, 600, 40}, {2, 0, 2}},
                    {{1, 639, 1}}},
                   {false, false, false, false, false, true});
  const std::vector<const ChunkData*> whole = {&stored, &compressed};
  const std::vector<const ChunkData*> apart = {&headers[0], &headers[1]};
  auto expected = UnpackSample(info, whole);
  ASSERT_TRUE(expected.ok()) << expected.status();
  auto unpacked = UnpackSample(info, apart, contents);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status();
  ASSERT_EQ(unpacked->columns.size(), expected->columns.size());
  std::vector<Tensor> batch;
  for (size_t c = 0; c < expected->columns.size(); ++c) {
    SCOPED_TRACE(c);
    EXPECT_EQ(unpacked->columns[c].shape, expected->columns[c].shape);
    EXPECT_EQ(unpacked->columns[c].bytes, expected->columns[c].bytes);
    Tensor& rows = batch.emplace_back();
    rows.dtype = expected->columns[c].dtype;
    rows.shape = expected->columns[c].shape;
    rows.shape.insert(rows.shape.begin(), 2);
    rows.bytes.assign(2 * expected->columns[c].bytes.size(), '\x5a');
  }
  const PackedSample packed{info,
                            {apart.begin(), apart.end()},
                            {contents.begin(), contents.end()},
                            {}};
  ASSERT_TRUE(UnpackSampleInto(packed, 1, absl::MakeSpan(batch)).ok());
  for (size_t c = 0; c < batch.size(); ++c) {
    SCOPED_TRACE(c);
    const std::string& row = expected->columns[c].bytes;
    EXPECT_EQ(batch[c].bytes.substr(0, row.size()),
              std::string(row.size(), '\x5a'));
    EXPECT_EQ(batch[c].bytes.substr(row.size()), row);
  }
}

}  // namespace
}  // namespace deepmind::reverb
