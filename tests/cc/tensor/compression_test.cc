#include "cc/tensor/compression.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cc/tensor/tensor.h"
#include "gtest/gtest.h"
#include "snappy.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::MakeStrings;
using testing::MakeTensor;
using testing::RandomBytes;
using testing::Values;

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

// Every dtype with a fixed-size host representation (DataTypeSize).
const std::vector<tensorflow::DataType>& NumericDtypes() {
  static const auto* dtypes = new std::vector<tensorflow::DataType>{
      tensorflow::DT_BOOL,          tensorflow::DT_INT8,
      tensorflow::DT_UINT8,         tensorflow::DT_QINT8,
      tensorflow::DT_QUINT8,        tensorflow::DT_FLOAT8_E5M2,
      tensorflow::DT_FLOAT8_E4M3FN, tensorflow::DT_INT16,
      tensorflow::DT_UINT16,        tensorflow::DT_HALF,
      tensorflow::DT_BFLOAT16,      tensorflow::DT_QINT16,
      tensorflow::DT_QUINT16,       tensorflow::DT_INT32,
      tensorflow::DT_UINT32,        tensorflow::DT_FLOAT,
      tensorflow::DT_QINT32,        tensorflow::DT_INT64,
      tensorflow::DT_UINT64,        tensorflow::DT_DOUBLE,
      tensorflow::DT_COMPLEX64,     tensorflow::DT_COMPLEX128};
  return *dtypes;
}

// A tensor of `dtype` and `shape` with random elements.
Tensor RandomTensor(tensorflow::DataType dtype, std::vector<int64_t> shape,
                    uint32_t seed) {
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes = RandomBytes(tensor.NumElements() * *DataTypeSize(dtype), seed);
  return tensor;
}

std::vector<int64_t> ShapeOf(const tensorflow::TensorProto& proto) {
  std::vector<int64_t> shape;
  for (const auto& dim : proto.tensor_shape().dim())
    shape.push_back(dim.size());
  return shape;
}

TEST(TensorCompressionTest, EveryNumericDtypeRoundTripsAsSnappy) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {7}, {3, 5}, {2, 3, 4}};
  uint32_t seed = 0;
  for (tensorflow::DataType dtype : NumericDtypes()) {
    for (const auto& shape : shapes) {
      const Tensor t = RandomTensor(dtype, shape, ++seed);
      SCOPED_TRACE(DescribeTensor(t));
      tensorflow::TensorProto proto;
      ASSERT_TRUE(CompressTensorAsProto(t, &proto).ok());
      EXPECT_EQ(proto.dtype(), dtype);
      EXPECT_EQ(ShapeOf(proto), shape);
      // The content is Snappy's raw format, as dm-reverb reads it.
      std::string uncompressed;
      ASSERT_TRUE(snappy::Uncompress(proto.tensor_content().data(),
                                     proto.tensor_content().size(),
                                     &uncompressed));
      EXPECT_EQ(uncompressed, t.bytes);

      auto back = DecompressTensorFromProto(proto);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->dtype, dtype);
      EXPECT_EQ(back->shape, shape);
      EXPECT_EQ(back->bytes, t.bytes);
      EXPECT_TRUE(back->strings.empty());

      tensorflow::TensorProto moved;
      ASSERT_TRUE(CompressTensorAsProto(Tensor(t), &moved).ok());
      EXPECT_EQ(moved.SerializeAsString(), proto.SerializeAsString());
    }
  }
}

TEST(TensorCompressionTest, StringTensorsOfAnyContentRoundTrip) {
  const std::string binary("a\0b\xff\x80", 5);
  const std::vector<Tensor> tensors = {
      MakeStrings({}, {"scalar"}),
      MakeStrings({0}, {}),
      MakeStrings({3}, {"", "", ""}),
      // Lengths of one, two and three varint bytes.
      MakeStrings({4}, {binary, std::string(127, 'a'), std::string(128, 'b'),
                        std::string(20000, 'c')}),
      MakeStrings({2, 2, 1}, {"w", "", "xyz", binary}),
  };
  for (const Tensor& t : tensors) {
    SCOPED_TRACE(DescribeTensor(t));
    tensorflow::TensorProto proto;
    ASSERT_TRUE(CompressTensorAsProto(t, &proto).ok());
    EXPECT_EQ(proto.dtype(), tensorflow::DT_STRING);
    EXPECT_EQ(ShapeOf(proto), t.shape);
    EXPECT_EQ(proto.string_val_size(), 0);
    auto back = DecompressTensorFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dtype, tensorflow::DT_STRING);
    EXPECT_EQ(back->shape, t.shape);
    EXPECT_EQ(back->strings, t.strings);
    EXPECT_TRUE(back->bytes.empty());

    tensorflow::TensorProto moved;
    ASSERT_TRUE(CompressTensorAsProto(Tensor(t), &moved).ok());
    EXPECT_EQ(moved.SerializeAsString(), proto.SerializeAsString());
  }
}

TEST(TensorCompressionTest, EmptyTensorsKeepTheirShape) {
  for (const auto& shape :
       std::vector<std::vector<int64_t>>{{0}, {0, 5}, {3, 0}, {2, 0, 4}}) {
    for (tensorflow::DataType dtype :
         {tensorflow::DT_FLOAT, tensorflow::DT_INT64, tensorflow::DT_UINT8}) {
      Tensor t;
      t.dtype = dtype;
      t.shape = shape;
      SCOPED_TRACE(DescribeTensor(t));
      tensorflow::TensorProto proto;
      ASSERT_TRUE(CompressTensorAsProto(t, &proto).ok());
      EXPECT_EQ(ShapeOf(proto), shape);
      auto back = DecompressTensorFromProto(proto);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->dtype, dtype);
      EXPECT_EQ(back->shape, shape);
      EXPECT_TRUE(back->bytes.empty());
    }
    Tensor strings = MakeStrings(shape, {});
    tensorflow::TensorProto proto;
    ASSERT_TRUE(CompressTensorAsProto(strings, &proto).ok());
    auto back = DecompressTensorFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->shape, shape);
    EXPECT_TRUE(back->strings.empty());
  }
}

TEST(TensorCompressionTest, IncompressibleDataRoundTrips) {
  // Below and above the size from which a recycled buffer is used.
  for (size_t size : {size_t{1}, size_t{100}, size_t{5000}, size_t{1} << 20}) {
    SCOPED_TRACE(size);
    const Tensor random =
        RandomTensor(tensorflow::DT_UINT8, {static_cast<int64_t>(size)}, size);
    tensorflow::TensorProto proto;
    ASSERT_TRUE(CompressTensorAsProto(random, &proto).ok());
    EXPECT_LE(proto.tensor_content().size(), snappy::MaxCompressedLength(size));
    auto back = DecompressTensorFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->bytes, random.bytes);
  }
}

TEST(TensorCompressionTest, IncompressibleDataIsStoredAsOneSnappyLiteral) {
  // Small (compressed whole, then judged), large (judged from probes) and
  // above a literal's 3-byte length.
  for (size_t size :
       {size_t{1}, size_t{59}, size_t{61}, size_t{300}, size_t{5000},
        size_t{70000}, size_t{1} << 20, size_t{17} << 20}) {
    SCOPED_TRACE(size);
    const Tensor random =
        RandomTensor(tensorflow::DT_UINT8, {static_cast<int64_t>(size)}, size);
    tensorflow::TensorProto proto;
    ASSERT_TRUE(CompressTensorAsProto(random, &proto).ok());
    const std::string& content = proto.tensor_content();
    // Varint32 length, a literal tag (and up to 4 length bytes), the bytes.
    ASSERT_LE(content.size(), size + 10);
    ASSERT_GE(content.size(), size + 2);
    EXPECT_EQ(content.substr(content.size() - size), random.bytes);
    // libsnappy (dm-reverb's decoder) reads it.
    std::string decoded;
    ASSERT_TRUE(snappy::Uncompress(content.data(), content.size(), &decoded));
    EXPECT_EQ(decoded, random.bytes);
    auto back = DecompressTensorFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->bytes, random.bytes);
    // A moved tensor (its buffer becomes the output) is stored alike.
    Tensor moved = random;
    tensorflow::TensorProto moved_proto;
    ASSERT_TRUE(CompressTensorAsProto(std::move(moved), &moved_proto).ok());
    EXPECT_EQ(moved_proto.tensor_content(), content);
  }
}

TEST(TensorCompressionTest, FramesOfRandomBytesAreStoredWithoutATry) {
  // From 16 KiB on, tensors below the large size are judged from two
  // probes of 4 KiB too; random ones are then stored as they are, and
  // compressible ones compressed whole.
  std::vector<uint8_t> pattern(28224);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = (i / 7) % 5;
  const Tensor compressible =
      MakeTensor<uint8_t>(tensorflow::DT_UINT8, {84, 84, 4}, pattern);
  EXPECT_FALSE(StoredWithoutTrying(compressible.bytes));
  tensorflow::TensorProto compressed;
  ASSERT_TRUE(CompressTensorAsProto(compressible, &compressed).ok());
  EXPECT_LT(compressed.tensor_content().size(), pattern.size() / 4);
  for (size_t size :
       {size_t{16383}, size_t{16384}, size_t{28224}, size_t{60000}}) {
    SCOPED_TRACE(size);
    const Tensor random =
        RandomTensor(tensorflow::DT_UINT8, {static_cast<int64_t>(size)}, size);
    EXPECT_EQ(StoredWithoutTrying(random.bytes), size >= 16384);
    tensorflow::TensorProto proto;
    ASSERT_TRUE(CompressTensorAsProto(random, &proto).ok());
    EXPECT_EQ(proto.tensor_content(), StoredHeader(size) + random.bytes);
    Tensor moved = random;
    tensorflow::TensorProto moved_proto;
    ASSERT_TRUE(CompressTensorAsProto(std::move(moved), &moved_proto).ok());
    EXPECT_EQ(moved_proto.tensor_content(), proto.tensor_content());
  }
}

TEST(TensorCompressionTest, HeadroomTakesTheStoredHeaderWithoutACopy) {
  for (size_t size : {size_t{70000}, size_t{1} << 20, size_t{17} << 20}) {
    SCOPED_TRACE(size);
    const Tensor random =
        RandomTensor(tensorflow::DT_UINT8, {static_cast<int64_t>(size)}, size);
    tensorflow::TensorProto expected;
    ASSERT_TRUE(CompressTensorAsProto(random, &expected).ok());
    const size_t headroom = StoredHeader(size).size();
    EXPECT_EQ(headroom, expected.tensor_content().size() - size);
    Tensor roomy = random;
    roomy.bytes = std::string(headroom, 'h') + random.bytes;
    const char* buffer = roomy.bytes.data();
    tensorflow::TensorProto proto;
    ASSERT_TRUE(CompressTensorAsProto(std::move(roomy), headroom, &proto).ok());
    EXPECT_EQ(proto.tensor_content().data(), buffer);  // Not copied.
    EXPECT_EQ(proto.SerializeAsString(), expected.SerializeAsString());
  }
}

TEST(TensorCompressionTest, HeadroomOfAnotherSizeOrCompressibleDataIsSkipped) {
  const size_t size = 1 << 20;
  std::vector<uint8_t> pattern(size);
  for (size_t i = 0; i < size; ++i) pattern[i] = (i / 7) % 5;
  const Tensor compressible = MakeTensor<uint8_t>(
      tensorflow::DT_UINT8, {static_cast<int64_t>(size)}, pattern);
  const Tensor random =
      RandomTensor(tensorflow::DT_UINT8, {static_cast<int64_t>(size)}, 3);
  const size_t fitting = StoredHeader(size).size();
  for (const Tensor* tensor : {&compressible, &random}) {
    for (size_t headroom : {fitting, fitting + 1, size_t{1}}) {
      SCOPED_TRACE(headroom);
      if (tensor == &random && headroom == fitting) continue;  // Above.
      tensorflow::TensorProto expected;
      ASSERT_TRUE(CompressTensorAsProto(*tensor, &expected).ok());
      Tensor roomy = *tensor;
      roomy.bytes = std::string(headroom, 'h') + tensor->bytes;
      tensorflow::TensorProto proto;
      ASSERT_TRUE(
          CompressTensorAsProto(std::move(roomy), headroom, &proto).ok());
      EXPECT_EQ(proto.SerializeAsString(), expected.SerializeAsString());
    }
  }
  // A headroom of 0 is the plain form; elements missing are refused.
  Tensor plain = random;
  tensorflow::TensorProto expected, proto;
  ASSERT_TRUE(CompressTensorAsProto(random, &expected).ok());
  ASSERT_TRUE(CompressTensorAsProto(std::move(plain), 0, &proto).ok());
  EXPECT_EQ(proto.SerializeAsString(), expected.SerializeAsString());
  Tensor short_of_elements = random;
  short_of_elements.bytes = std::string(10, 'h') + random.bytes.substr(1);
  tensorflow::TensorProto refused;
  EXPECT_EQ(
      CompressTensorAsProto(std::move(short_of_elements), 10, &refused).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(TensorCompressionTest, CompressibleDataIsCompressedWhateverItsProbesSay) {
  // Random bytes where the probes look (the start, thirds, the end of a
  // 1 MiB tensor) would be stored; compressible ones are compressed, and so
  // is data that only looks compressible in its probes but turns out not
  // to be: the full output is judged again and then stored.
  std::string zeros(1 << 20, '\0');
  std::string noise = RandomBytes(1 << 20, 7);
  std::memset(noise.data(), 0, 8 << 10);
  std::memset(noise.data() + (1 << 20) - (8 << 10), 0, 8 << 10);
  const size_t stride = ((1 << 20) - (8 << 10)) / 3;
  std::memset(noise.data() + stride, 0, 8 << 10);
  std::memset(noise.data() + 2 * stride, 0, 8 << 10);
  for (const std::string* bytes : {&zeros, &noise}) {
    Tensor t;
    t.dtype = tensorflow::DT_UINT8;
    t.shape = {1 << 20};
    t.bytes = *bytes;
    tensorflow::TensorProto proto;
    ASSERT_TRUE(CompressTensorAsProto(t, &proto).ok());
    if (bytes == &zeros) {
      EXPECT_LT(proto.tensor_content().size(), 100 << 10);
    } else {
      EXPECT_LE(proto.tensor_content().size(), bytes->size() + 10);
      EXPECT_EQ(proto.tensor_content().substr(proto.tensor_content().size() -
                                              bytes->size()),
                *bytes);
    }
    EXPECT_EQ(DecompressTensorFromProto(proto)->bytes, *bytes);
  }
}

TEST(TensorCompressionTest, TensorsWithoutTheirElementsAreNotCompressed) {
  tensorflow::TensorProto proto;
  EXPECT_EQ(CompressTensorAsProto(MakeStrings({3}, {"a"}), &proto).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompressTensorAsProto(Tensor(MakeStrings({1}, {"a", "b"})), &proto)
                .code(),
            absl::StatusCode::kInvalidArgument);
  Tensor long_bytes = MakeTensor<int32_t>(tensorflow::DT_INT32, {2}, {1, 2, 3});
  EXPECT_EQ(CompressTensorAsProto(long_bytes, &proto).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompressTensorAsProto(std::move(long_bytes), &proto).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor no_dtype;
  no_dtype.shape = {1};
  no_dtype.bytes = "x";
  EXPECT_EQ(CompressTensorAsProto(no_dtype, &proto).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorCompressionTest, MalformedProtosAreInvalidArguments) {
  const Tensor t =
      MakeTensor<int32_t>(tensorflow::DT_INT32, {2, 3}, {1, 2, 3, 4, 5, 6});
  tensorflow::TensorProto good;
  ASSERT_TRUE(CompressTensorAsProto(t, &good).ok());
  tensorflow::TensorProto good_strings;
  ASSERT_TRUE(
      CompressTensorAsProto(MakeStrings({2}, {"ab", "c"}), &good_strings).ok());

  std::vector<std::pair<std::string, tensorflow::TensorProto>> cases;
  auto add = [&cases](std::string name, const tensorflow::TensorProto& base,
                      auto change) {
    tensorflow::TensorProto proto = base;
    change(proto);
    cases.emplace_back(std::move(name), std::move(proto));
  };
  using Proto = tensorflow::TensorProto;
  add("no content", good, [](Proto& p) { p.clear_tensor_content(); });
  add("truncated", good,
      [](Proto& p) { p.mutable_tensor_content()->pop_back(); });
  add("extra byte", good,
      [](Proto& p) { p.mutable_tensor_content()->append("x"); });
  add("unknown rank", good,
      [](Proto& p) { p.mutable_tensor_shape()->set_unknown_rank(true); });
  add("dtype of another size", good,
      [](Proto& p) { p.set_dtype(tensorflow::DT_INT64); });
  add("no dtype", good, [](Proto& p) { p.set_dtype(tensorflow::DT_INVALID); });
  add("length beyond any expansion", good, [](Proto& p) {
    // Claims 2^28 bytes in a few: must be refused before allocating them.
    p.mutable_tensor_shape()->clear_dim();
    p.mutable_tensor_shape()->add_dim()->set_size(int64_t{1} << 26);
    p.set_tensor_content(std::string("\x80\x80\x80\x80\x01\x00", 6));
  });
  add("bad varint length", good,
      [](Proto& p) { p.set_tensor_content(std::string(6, '\xff')); });
  add("strings: truncated", good_strings,
      [](Proto& p) { p.mutable_tensor_content()->pop_back(); });
  add("strings: extra byte", good_strings,
      [](Proto& p) { p.mutable_tensor_content()->append("x"); });
  add("strings: bad varint", good_strings,
      [](Proto& p) { p.set_tensor_content(std::string(12, '\xff')); });
  add("strings: no content", good_strings,
      [](Proto& p) { p.clear_tensor_content(); });
  add("strings: string_val count", good_strings, [](Proto& p) {
    p.clear_tensor_content();
    p.add_string_val("only one");
  });
  for (const auto& [name, proto] : cases) {
    EXPECT_EQ(DecompressTensorFromProto(proto).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
}

TEST(TensorCompressionTest, DamagedContentDecodesOrIsAnInvalidArgument) {
  // Random byte changes and truncations of valid contents: every one
  // decodes to the shape's size, or is refused; none may crash.
  std::vector<int32_t> values(300);
  for (int i = 0; i < 300; ++i) values[i] = i % 7 == 0 ? i : 3;
  tensorflow::TensorProto numeric, strings;
  ASSERT_TRUE(
      CompressTensorAsProto(
          MakeTensor<int32_t>(tensorflow::DT_INT32, {30, 10}, values), &numeric)
          .ok());
  ASSERT_TRUE(
      CompressTensorAsProto(
          MakeStrings({4}, {"a", "bb", std::string(200, 'c'), ""}), &strings)
          .ok());
  std::mt19937 random(7);
  int refused = 0;
  for (const tensorflow::TensorProto* base : {&numeric, &strings}) {
    for (int i = 0; i < 3000; ++i) {
      tensorflow::TensorProto proto = *base;
      std::string& content = *proto.mutable_tensor_content();
      for (int c = 1 + static_cast<int>(random() % 3); c > 0; --c) {
        content[random() % content.size()] = static_cast<char>(random());
      }
      if (i % 3 == 0) content.resize(random() % content.size());
      auto back = DecompressTensorFromProto(proto);
      if (back.ok()) {
        EXPECT_EQ(back->shape, ShapeOf(*base));
        EXPECT_EQ(back->IsString() ? back->strings.size() : back->bytes.size(),
                  back->IsString() ? 4u : 1200u);
      } else {
        EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument)
            << back.status();
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

// Checks that `encoded` holds, after its first row, the differences of
// consecutive rows of `original`, as unsigned integers of type U.
template <typename U>
void ExpectRowDifferences(const Tensor& original, const Tensor& encoded) {
  const std::vector<U> before = Values<U>(original);
  const std::vector<U> after = Values<U>(encoded);
  ASSERT_EQ(before.size(), after.size());
  const size_t row = before.size() / original.shape[0];
  for (size_t i = 0; i < before.size(); ++i) {
    const U expected =
        i < row ? before[i] : static_cast<U>(before[i] - before[i - row]);
    ASSERT_EQ(after[i], expected) << "element " << i;
  }
}

TEST(TensorCompressionTest, DeltaEncodingOfEveryIntegerDtypeRoundTrips) {
  const std::vector<std::pair<tensorflow::DataType, int>> dtypes = {
      {tensorflow::DT_INT8, 1},  {tensorflow::DT_UINT8, 1},
      {tensorflow::DT_INT16, 2}, {tensorflow::DT_UINT16, 2},
      {tensorflow::DT_INT32, 4}, {tensorflow::DT_UINT32, 4},
      {tensorflow::DT_INT64, 8}, {tensorflow::DT_UINT64, 8}};
  uint32_t seed = 100;
  for (const auto& [dtype, width] : dtypes) {
    for (const auto& shape :
         std::vector<std::vector<int64_t>>{{2, 1}, {5, 3}, {4, 3, 2}}) {
      const Tensor t = RandomTensor(dtype, shape, ++seed);
      SCOPED_TRACE(DescribeTensor(t));
      Tensor encoded = t;
      DeltaEncode(&encoded, /*encode=*/true);
      switch (width) {
        case 1:
          ExpectRowDifferences<uint8_t>(t, encoded);
          break;
        case 2:
          ExpectRowDifferences<uint16_t>(t, encoded);
          break;
        case 4:
          ExpectRowDifferences<uint32_t>(t, encoded);
          break;
        case 8:
          ExpectRowDifferences<uint64_t>(t, encoded);
          break;
      }
      // As a delta-encoded chunk travels: encoded, compressed and back.
      tensorflow::TensorProto proto;
      ASSERT_TRUE(CompressTensorAsProto(encoded, &proto).ok());
      auto back = DecompressTensorFromProto(proto);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->bytes, encoded.bytes);
      DeltaEncode(&*back, /*encode=*/false);
      EXPECT_EQ(back->shape, t.shape);
      EXPECT_EQ(back->bytes, t.bytes);
    }
  }
}

TEST(TensorCompressionTest, DeltaEncodingLeavesOtherTensorsUnchanged) {
  std::vector<Tensor> tensors;
  uint32_t seed = 200;
  for (tensorflow::DataType dtype :
       {tensorflow::DT_BOOL, tensorflow::DT_HALF, tensorflow::DT_BFLOAT16,
        tensorflow::DT_FLOAT, tensorflow::DT_DOUBLE, tensorflow::DT_COMPLEX64,
        tensorflow::DT_COMPLEX128}) {
    tensors.push_back(RandomTensor(dtype, {3, 4}, ++seed));
  }
  tensors.push_back(RandomTensor(tensorflow::DT_INT32, {}, ++seed));
  tensors.push_back(RandomTensor(tensorflow::DT_INT32, {0, 3}, ++seed));
  tensors.push_back(RandomTensor(tensorflow::DT_INT64, {3, 0}, ++seed));
  tensors.push_back(MakeStrings({2, 2}, {"a", "b", "c", "d"}));
  for (const Tensor& t : tensors) {
    SCOPED_TRACE(DescribeTensor(t));
    for (bool encode : {true, false}) {
      Tensor copy = t;
      DeltaEncode(&copy, encode);
      EXPECT_EQ(copy.shape, t.shape);
      EXPECT_EQ(copy.bytes, t.bytes);
      EXPECT_EQ(copy.strings, t.strings);
    }
  }
}

}  // namespace
}  // namespace deepmind::reverb
