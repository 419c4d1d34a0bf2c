#include "cc/tensor/tensor.h"

#include <cstring>
#include <string>
#include <vector>

#include "cc/tensor/compression.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

template <typename T>
Tensor MakeTensor(tensorflow::DataType dtype, std::vector<int64_t> shape,
                  const std::vector<T>& values) {
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes.assign(reinterpret_cast<const char*>(values.data()),
                      values.size() * sizeof(T));
  return tensor;
}

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  std::vector<T> values(tensor.bytes.size() / sizeof(T));
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

Tensor MakeStrings(std::vector<int64_t> shape, std::vector<std::string> values) {
  Tensor tensor;
  tensor.dtype = tensorflow::DT_STRING;
  tensor.shape = std::move(shape);
  tensor.strings = std::move(values);
  return tensor;
}

TEST(TensorTest, StackAddsLeadingDimension) {
  std::vector<Tensor> steps = {
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {1, 2}),
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {3, 4}),
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {5, 6})};
  auto stacked = StackTensors(steps);
  ASSERT_TRUE(stacked.ok()) << stacked.status();
  EXPECT_EQ(stacked->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<int32_t>(*stacked), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(TensorTest, StackRejectsDifferentShapes) {
  std::vector<Tensor> steps = {
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {1, 2}),
      MakeTensor<int32_t>(tensorflow::DT_INT32, {1}, {3})};
  EXPECT_EQ(StackTensors(steps).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, SliceConcatAndRows) {
  Tensor t = MakeTensor<float>(tensorflow::DT_FLOAT, {3, 2},
                               {0, 1, 2, 3, 4, 5});
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

TEST(TensorCompressionTest, NumericRoundTripIsCompressed) {
  std::vector<int64_t> values(1000, 7);
  Tensor t = MakeTensor<int64_t>(tensorflow::DT_INT64, {10, 100}, values);
  tensorflow::TensorProto proto;
  ASSERT_TRUE(CompressTensorAsProto(t, &proto).ok());
  EXPECT_EQ(proto.dtype(), tensorflow::DT_INT64);
  EXPECT_EQ(proto.tensor_shape().dim_size(), 2);
  EXPECT_LT(proto.tensor_content().size(), t.bytes.size() / 10);
  auto back = DecompressTensorFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape, t.shape);
  EXPECT_EQ(back->bytes, t.bytes);
}

TEST(TensorCompressionTest, MovedTensorCompressesAlikeIntoItsOwnBuffer) {
  std::vector<uint8_t> pattern(300000);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = (i * i) % 251;
  // Compressible, incompressible, and larger than the scratch buffer.
  for (size_t size : {size_t{1000}, pattern.size(), size_t{9} << 20}) {
    std::vector<uint8_t> values(size);
    for (size_t i = 0; i < size; ++i) values[i] = pattern[i % pattern.size()];
    Tensor t = MakeTensor<uint8_t>(tensorflow::DT_UINT8,
                                   {static_cast<int64_t>(size)}, values);
    tensorflow::TensorProto copied, moved;
    ASSERT_TRUE(CompressTensorAsProto(t, &copied).ok());
    const char* buffer = t.bytes.data();
    ASSERT_TRUE(CompressTensorAsProto(std::move(t), &moved).ok());
    EXPECT_EQ(moved.SerializeAsString(), copied.SerializeAsString()) << size;
    if (size == 1000) EXPECT_EQ(moved.tensor_content().data(), buffer);
    EXPECT_EQ(DecompressTensorFromProto(moved)->bytes,
              std::string(values.begin(), values.end()));
  }
  Tensor strings = MakeStrings({2}, {"a", "bc"});
  tensorflow::TensorProto copied, moved;
  ASSERT_TRUE(CompressTensorAsProto(strings, &copied).ok());
  ASSERT_TRUE(CompressTensorAsProto(std::move(strings), &moved).ok());
  EXPECT_EQ(moved.SerializeAsString(), copied.SerializeAsString());
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
  EXPECT_EQ(AppendRows(MakeTensor<int32_t>(tensorflow::DT_INT32, {1, 3},
                                           {1, 2, 3}),
                       &out)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AppendRows(MakeTensor<float>(tensorflow::DT_FLOAT, {1, 2}, {1, 2}),
                       &out)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.shape, (std::vector<int64_t>{3, 2}));
}

TEST(TensorCompressionTest, StringsUseTensorFlowStringListEncoding) {
  Tensor t = MakeStrings({2}, {"ab", std::string(200, 'x')});
  tensorflow::TensorProto proto;
  ASSERT_TRUE(CompressTensorAsProto(t, &proto).ok());
  // Varint lengths (2, then 200 as two bytes), then the bytes.
  const std::string& content = proto.tensor_content();
  ASSERT_EQ(content.size(), 1 + 2 + 2 + 200);
  EXPECT_EQ(content[0], 2);
  EXPECT_EQ(static_cast<unsigned char>(content[1]), 200 & 0x7f | 0x80);
  EXPECT_EQ(content[2], 1);
  EXPECT_EQ(content.substr(3, 2), "ab");
  auto back = DecompressTensorFromProto(proto);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->strings, t.strings);
}

TEST(TensorCompressionTest, StringValIsAccepted) {
  tensorflow::TensorProto proto;
  proto.set_dtype(tensorflow::DT_STRING);
  proto.mutable_tensor_shape()->add_dim()->set_size(2);
  proto.add_string_val("x");
  proto.add_string_val("yz");
  auto back = DecompressTensorFromProto(proto);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->strings, (std::vector<std::string>{"x", "yz"}));
}

TEST(TensorCompressionTest, CorruptOrAbsurdProtosAreRejected) {
  Tensor t = MakeTensor<float>(tensorflow::DT_FLOAT, {4}, {1, 2, 3, 4});
  tensorflow::TensorProto proto;
  ASSERT_TRUE(CompressTensorAsProto(t, &proto).ok());

  auto wrong_shape = proto;
  wrong_shape.mutable_tensor_shape()->mutable_dim(0)->set_size(5);
  EXPECT_EQ(DecompressTensorFromProto(wrong_shape).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto huge = proto;
  huge.mutable_tensor_shape()->mutable_dim(0)->set_size(int64_t{1} << 40);
  EXPECT_EQ(DecompressTensorFromProto(huge).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto negative = proto;
  negative.mutable_tensor_shape()->mutable_dim(0)->set_size(-1);
  EXPECT_EQ(DecompressTensorFromProto(negative).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto garbage = proto;
  garbage.set_tensor_content("\xff\xff\xff\xff\x0f garbage");
  EXPECT_EQ(DecompressTensorFromProto(garbage).status().code(),
            absl::StatusCode::kInvalidArgument);

  tensorflow::TensorProto strings;
  strings.set_dtype(tensorflow::DT_STRING);
  strings.mutable_tensor_shape()->add_dim()->set_size(int64_t{1} << 50);
  strings.set_tensor_content("\x01x");
  EXPECT_EQ(DecompressTensorFromProto(strings).status().code(),
            absl::StatusCode::kInvalidArgument);

  tensorflow::TensorProto resource;
  resource.set_dtype(tensorflow::DT_RESOURCE);
  EXPECT_EQ(DecompressTensorFromProto(resource).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorCompressionTest, DeltaEncodingRoundTripsWithWrapAround) {
  Tensor t = MakeTensor<int8_t>(tensorflow::DT_INT8, {3, 2},
                                {127, -128, -128, 127, 0, 5});
  Tensor encoded = t;
  DeltaEncode(&encoded, /*encode=*/true);
  EXPECT_EQ(Values<int8_t>(encoded),
            (std::vector<int8_t>{127, -128, 1, -1, -128, -122}));
  DeltaEncode(&encoded, /*encode=*/false);
  EXPECT_EQ(encoded.bytes, t.bytes);
}

TEST(TensorCompressionTest, DeltaEncodingSkipsFloatsAndRankOne) {
  Tensor floats = MakeTensor<float>(tensorflow::DT_FLOAT, {2, 1}, {1, 2});
  Tensor copy = floats;
  DeltaEncode(&copy, true);
  EXPECT_EQ(copy.bytes, floats.bytes);
  Tensor rank1 = MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {1, 2});
  copy = rank1;
  DeltaEncode(&copy, true);
  EXPECT_EQ(copy.bytes, rank1.bytes);
}

}  // namespace
}  // namespace deepmind::reverb
