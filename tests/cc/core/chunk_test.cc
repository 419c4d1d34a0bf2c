#include "cc/core/chunk.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "cc/client/sample.h"
#include "cc/tensor/compression.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

// A chunk of two uint8 tensors of `rows` x `columns`, compressed as the
// writers do, and a string tensor.
ChunkData MakeChunk(int rows, int columns) {
  ChunkData chunk;
  chunk.set_chunk_key(42);
  chunk.mutable_sequence_range()->set_episode_id(7);
  chunk.mutable_sequence_range()->set_end(rows - 1);
  chunk.set_data_tensors_len(3);
  for (int t = 0; t < 2; ++t) {
    Tensor tensor;
    tensor.dtype = tensorflow::DT_UINT8;
    tensor.shape = {rows, columns};
    tensor.bytes.resize(static_cast<size_t>(rows) * columns);
    for (size_t i = 0; i < tensor.bytes.size(); ++i) {
      tensor.bytes[i] = static_cast<char>((i * 7919 + t) % 251);
    }
    EXPECT_TRUE(CompressTensorAsProto(std::move(tensor),
                                      chunk.mutable_data()->add_tensors())
                    .ok());
  }
  tensorflow::TensorProto* strings = chunk.mutable_data()->add_tensors();
  strings->set_dtype(tensorflow::DT_STRING);
  strings->mutable_tensor_shape()->add_dim()->set_size(rows);
  for (int r = 0; r < rows; ++r) strings->add_string_val("step");
  return chunk;
}

// ParseChunkHeader with the contents as views (of `bytes`, which is flat).
absl::Status ParseViews(const absl::Cord& bytes, ChunkData* header,
                        std::vector<absl::string_view>* contents) {
  std::vector<absl::Cord> pieces;
  absl::Status status = ParseChunkHeader(bytes, header, &pieces);
  contents->clear();
  for (const absl::Cord& piece : pieces) contents->push_back(*piece.TryFlat());
  return status;
}

TEST(ParseChunkHeaderTest, HeaderAndContentsMakeTheSameChunk) {
  const ChunkData chunk = MakeChunk(4, 1000);
  const absl::Cord bytes(chunk.SerializeAsString());
  ChunkData header;
  std::vector<absl::string_view> contents;
  ASSERT_TRUE(ParseViews(bytes, &header, &contents).ok());
  ASSERT_EQ(contents.size(), 3);
  ChunkData rebuilt = header;
  for (int t = 0; t < 3; ++t) {
    EXPECT_TRUE(header.data().tensors(t).tensor_content().empty());
    rebuilt.mutable_data()->mutable_tensors(t)->set_tensor_content(
        std::string(contents[t]));
  }
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(rebuilt, chunk));
  // The views point into the bytes, not at copies.
  const absl::string_view flat = *bytes.TryFlat();
  EXPECT_GE(contents[0].data(), flat.data());
  EXPECT_LE(contents[0].data() + contents[0].size(), flat.data() + flat.size());
  EXPECT_TRUE(contents[2].empty());  // string_val, no content.
}

TEST(ParseChunkHeaderTest, SampleUnpackedFromViewsEqualsTheProtoPath) {
  const ChunkData chunk = MakeChunk(4, 1000);
  const absl::Cord bytes(chunk.SerializeAsString());
  ChunkData header;
  std::vector<absl::string_view> contents;
  ASSERT_TRUE(ParseViews(bytes, &header, &contents).ok());

  auto info = std::make_shared<SampleInfo>();
  FlatTrajectory* trajectory = info->mutable_item()->mutable_flat_trajectory();
  for (int t = 0; t < 3; ++t) {
    auto* slice = trajectory->add_columns()->add_chunk_slices();
    slice->set_chunk_key(42);
    slice->set_offset(1);
    slice->set_length(2);
    slice->set_index(t);
  }
  const ChunkData* from_proto[] = {&chunk};
  const ChunkData* from_views[] = {&header};
  ChunkContents apart;
  apart.views = contents;
  const ChunkContents* views[] = {&apart};
  auto expected = UnpackSample(info, from_proto);
  auto actual = UnpackSample(info, from_views, views);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(actual.ok()) << actual.status();
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(actual->columns[t].shape, expected->columns[t].shape);
    EXPECT_EQ(actual->columns[t].bytes, expected->columns[t].bytes);
    EXPECT_EQ(actual->columns[t].strings, expected->columns[t].strings);
  }
  // Without its contents, the header alone holds no data.
  EXPECT_FALSE(UnpackSample(info, from_views).ok());
}

TEST(ParseChunkHeaderTest, MalformedBytesAreInvalidArgument) {
  std::string bytes = MakeChunk(2, 100).SerializeAsString();
  ChunkData header;
  std::vector<absl::string_view> contents;
  for (size_t cut : {size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_TRUE(absl::IsInvalidArgument(
        ParseViews(absl::Cord(bytes.substr(0, cut)), &header, &contents)));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseViews(absl::Cord("\xff\xff\xff"), &header, &contents)));
}

}  // namespace
}  // namespace deepmind::reverb
