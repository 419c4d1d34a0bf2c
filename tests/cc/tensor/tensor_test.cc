#include "cc/tensor/tensor.h"

#include <string>
#include <vector>

#include "cc/tensor/compression.h"
#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::MakeStrings;
using testing::MakeTensor;
using testing::Values;

TEST(TensorTest, StackAddsLeadingDimension) {
  std::vector<Tensor> steps = {
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {1, 2}),
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {3, 4}),
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {5, 6})};
  auto stacked = StackTensors(steps);
  ASSERT_TRUE(stacked.ok()) << stacked.status();
  EXPECT_EQ(stacked->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<int32_t>(*stacked),
            (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(TensorTest, StackRejectsDifferentShapes) {
  std::vector<Tensor> steps = {
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {1, 2}),
      MakeTensor<int32_t>(tensorflow::DT_INT32, {1}, {3})};
  EXPECT_EQ(StackTensors(steps).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, SliceConcatAndRows) {
  Tensor t =
      MakeTensor<float>(tensorflow::DT_FLOAT, {3, 2}, {0, 1, 2, 3, 4, 5});
  auto middle = SliceRows(t, 1, 2);
  ASSERT_TRUE(middle.ok());
  EXPECT_EQ(Values<float>(*middle), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_FALSE(SliceRows(t, 2, 2).ok());
  EXPECT_FALSE(SliceRows(t, -1, 1).ok());

  std::vector<Tensor> parts;
  parts.push_back(*SliceRows(t, 0, 1));
  parts.push_back(*middle);
  auto joined = ConcatRows(std::move(parts));
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->shape, t.shape);
  EXPECT_EQ(joined->bytes, t.bytes);

  auto row = GetRow(t, 2);
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<float>(*row), (std::vector<float>{4, 5}));
}

TEST(TensorTest, StringRows) {
  Tensor t = MakeStrings({3}, {"a", "", "ccc"});
  auto row = GetRow(t, 2);
  ASSERT_TRUE(row.ok());
  EXPECT_TRUE(row->shape.empty());
  EXPECT_EQ(row->strings, (std::vector<std::string>{"ccc"}));
}

TEST(TensorViewTest, RowsAreViewedWhereTheyAre) {
  std::vector<int32_t> values(24);
  for (int i = 0; i < 24; ++i) values[i] = i * 3;
  Tensor t = MakeTensor<int32_t>(tensorflow::DT_INT32, {6, 2, 2}, values);
  auto rows = ViewRows(t, 1, 5);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->shape, (absl::InlinedVector<int64_t, 4>{5, 2, 2}));
  EXPECT_EQ(rows->bytes.data(), t.bytes.data() + 16);
  EXPECT_EQ(rows->bytes.size(), 80u);
  for (int64_t offset : {0, 2, 5}) {
    for (int64_t length : {0, 1}) {
      tensorflow::TensorProto viewed, copied;
      ASSERT_TRUE(
          CompressTensorAsProto(*ViewRows(t, offset, length), &viewed).ok());
      ASSERT_TRUE(
          CompressTensorAsProto(*SliceRows(t, offset, length), &copied).ok());
      EXPECT_EQ(viewed.SerializeAsString(), copied.SerializeAsString())
          << offset << "+" << length;
    }
  }
  EXPECT_EQ(ViewRows(t, 4, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ViewRows(t, 7, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  Tensor strings = MakeStrings({3, 2}, {"a", "b", "c", "d", "e", "f"});
  auto string_rows = ViewRows(strings, 1, 2);
  ASSERT_TRUE(string_rows.ok());
  EXPECT_EQ(std::vector<std::string>(string_rows->strings.begin(),
                                     string_rows->strings.end()),
            (std::vector<std::string>{"c", "d", "e", "f"}));
}

TEST(TensorViewTest, ElementsMustMatchTheShape) {
  Tensor t = MakeTensor<int32_t>(tensorflow::DT_INT32, {2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(CheckElements(t).ok());
  TensorView short_bytes = t;
  short_bytes.bytes.remove_suffix(1);
  tensorflow::TensorProto proto;
  EXPECT_EQ(CheckElements(short_bytes).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompressTensorAsProto(short_bytes, &proto).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ViewRows(short_bytes, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  TensorView negative = t;
  negative.shape = {-2, -2};
  EXPECT_EQ(CheckElements(negative).code(), absl::StatusCode::kInvalidArgument);
  TensorView few_strings = MakeStrings({3}, {"a"});
  EXPECT_EQ(CheckElements(few_strings).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorViewTest, AppendRowsCopiesRowsOfTheSameDtypeAndShape) {
  std::vector<int32_t> values = {1, 2, 3, 4, 5, 6};
  Tensor source = MakeTensor<int32_t>(tensorflow::DT_INT32, {3, 2}, values);
  Tensor out;
  ASSERT_TRUE(AppendRows(*ViewRows(source, 2, 1), &out).ok());
  ASSERT_TRUE(AppendRows(*ViewRows(source, 0, 2), &out).ok());
  source.bytes.assign(source.bytes.size(), '\0');  // Copies, not views.
  EXPECT_EQ(out.dtype, tensorflow::DT_INT32);
  EXPECT_EQ(out.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{5, 6, 1, 2, 3, 4}));
  EXPECT_EQ(
      AppendRows(MakeTensor<int32_t>(tensorflow::DT_INT32, {1, 3}, {1, 2, 3}),
                 &out)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      AppendRows(MakeTensor<float>(tensorflow::DT_FLOAT, {1, 2}, {1, 2}), &out)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.shape, (std::vector<int64_t>{3, 2}));
}

}  // namespace
}  // namespace deepmind::reverb
