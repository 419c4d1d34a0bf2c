#include "cc/tensor/compression.h"

#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "cc/support/buffer_pool.h"
#include "cc/support/status_macros.h"
#include "cc/support/varint.h"
#include "cc/tensor/snappy_decode.h"
#include "snappy.h"

namespace deepmind::reverb {
namespace {

using tensorflow::TensorProto;

absl::Status DecodeStringList(absl::string_view content, int64_t n,
                              std::vector<std::string>* out) {
  // Every element takes at least one byte of lengths.
  if (n > static_cast<int64_t>(content.size())) {
    return absl::InvalidArgumentError("Corrupt string tensor content.");
  }
  const char* p = content.data();
  const char* end = p + content.size();
  std::vector<uint32_t> sizes(n);
  uint64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!GetVarint32(&p, end, &sizes[i])) {
      return absl::InvalidArgumentError("Corrupt string tensor content.");
    }
    total += sizes[i];
  }
  if (total != static_cast<uint64_t>(end - p)) {
    return absl::InvalidArgumentError("Corrupt string tensor content.");
  }
  out->reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    out->emplace_back(p, sizes[i]);
    p += sizes[i];
  }
  return absl::OkStatus();
}

// OK if `content` claims to decompress to `length` bytes, the size of the
// tensor `described`. Snappy expands at most ~21x (a 3-byte copy of 64
// bytes): a larger claim is corrupt and must not allocate.
absl::Status CheckUncompressedLength(const TensorView& described,
                                     absl::string_view content, size_t length) {
  constexpr size_t kMaxExpansion = 22;
  size_t claimed = 0;
  if (!SnappyUncompressedLength(content, &claimed) || claimed != length ||
      claimed > content.size() * kMaxExpansion + 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("Compressed tensor content does not hold a ",
                     DescribeTensor(described), " tensor."));
  }
  return absl::OkStatus();
}

template <typename T>
void DeltaEncodeAs(Tensor* tensor, bool encode) {
  const int64_t rows = tensor->shape[0];
  const int64_t row_elements = rows == 0 ? 0 : tensor->NumElements() / rows;
  auto* data = reinterpret_cast<T*>(tensor->bytes.data());
  if (encode) {
    for (int64_t i = rows * row_elements - 1; i >= row_elements; --i) {
      data[i] = static_cast<T>(data[i] - data[i - row_elements]);
    }
  } else {
    for (int64_t i = row_elements; i < rows * row_elements; ++i) {
      data[i] = static_cast<T>(data[i] + data[i - row_elements]);
    }
  }
}

// Snappy's raw format has no stored mode, but a stream of one literal is
// valid snappy: the varint32 length, a literal tag, and the bytes as they
// are. Every snappy decoder (dm-reverb's too) reads it, at the cost of a
// copy; writing it is a copy too. Returns the bytes written to `out`, which
// has room for kStoredOverhead more than `input`.
constexpr size_t kStoredOverhead = 10;  // Varint32 and literal tag, at most.

// Writes the stored stream's header for `length` bytes to `out` (room for
// kStoredOverhead); returns its size.
size_t WriteStoredHeader(size_t length, char* out) {
  char* p = out;
  for (uint32_t v = static_cast<uint32_t>(length);; v >>= 7) {
    if (v < 0x80) {
      *p++ = static_cast<char>(v);
      break;
    }
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
  }
  if (length > 0) {
    const uint32_t n = static_cast<uint32_t>(length - 1);
    if (n < 60) {
      *p++ = static_cast<char>(n << 2);
    } else {
      const int bytes = n < (1u << 8)    ? 1
                        : n < (1u << 16) ? 2
                        : n < (1u << 24) ? 3
                                         : 4;
      *p++ = static_cast<char>((59 + bytes) << 2);
      for (int i = 0; i < bytes; ++i) *p++ = static_cast<char>(n >> (8 * i));
    }
  }
  return p - out;
}

size_t WriteStored(absl::string_view input, char* out) {
  const size_t header = WriteStoredHeader(input.size(), out);
  std::memcpy(out + header, input.data(), input.size());
  return header + input.size();
}

// Whether `compressed` bytes for `raw` are worth decoding: at least an
// eighth saved. Less is not worth snappy's decoding over a copy.
bool Shrinks(size_t compressed, size_t raw) { return compressed * 8 < raw * 7; }

// Whether `input` is large: compressed into a recycled buffer (below).
bool IsLarge(absl::string_view input) {
  return snappy::MaxCompressedLength(input.size()) >= BufferPool::kMinBytes;
}

// Inputs from this size on are judged from probes (ProbeShrinks) before
// snappy compresses them whole.
constexpr size_t kMinProbedBytes = 16 << 10;

// Whether `input` (kMinProbedBytes or more) looks compressible, from
// snappy's output for a few blocks spread over it: 4 of 8 KiB of a large
// input (a 1 MiB step pays about 3% of a full compression for the answer),
// 2 of 4 KiB of a smaller one (a 28 KB frame: under a third of the bytes,
// and snappy's hash table, which it clears per call and sizes to its input,
// a quarter as large).
bool ProbeShrinks(absl::string_view input) {
  const bool large = IsLarge(input);
  const int probes = large ? 4 : 2;
  const size_t probe_bytes = large ? 8 << 10 : 4 << 10;
  // snappy::MaxCompressedLength(n) is 32 + n + n / 6.
  constexpr size_t kMaxProbeBytes = 8 << 10;
  thread_local char scratch[kMaxProbeBytes + kMaxProbeBytes / 6 + 64];
  size_t raw = 0, compressed = 0;
  const size_t stride = (input.size() - probe_bytes) / (probes - 1);
  for (int i = 0; i < probes; ++i) {
    size_t length = 0;
    snappy::RawCompress(input.data() + i * stride, probe_bytes, scratch,
                        &length);
    raw += probe_bytes;
    compressed += length;
  }
  return Shrinks(compressed, raw);
}

// Whether `input` can be stored (a stored stream's length is a varint32: at
// most 4 GiB).
bool Storable(absl::string_view input) {
  return input.size() <= std::numeric_limits<uint32_t>::max();
}

// Compresses `input` into `output`, which may be the string `input` views:
// snappy's stream, or the stored stream above when snappy does not shrink
// the input (incompressible data: random bytes, encrypted or already
// compressed data), so that reading it back is a copy, not a decode. An
// input whose probes do not shrink (`stored`: StoredWithoutTrying(input), as
// the caller found it) is stored without a try.
//
// snappy::Compress(std::string) zero-fills the string to the largest
// possible output before compressing into it: for a 1 MB step that is a
// 1.2 MB memset (and fresh pages) per call. Large inputs are compressed into
// a recycled buffer instead, which `output` then takes over (its old buffer
// goes back to the pool); small ones into a per-thread scratch buffer,
// copied out.
void SnappyCompress(absl::string_view input, bool stored, std::string* output) {
  const size_t max_length = snappy::MaxCompressedLength(input.size());
  static_assert(kStoredOverhead <= 32);  // max_length >= size + 32.
  size_t length = 0;
  if (IsLarge(input)) {
    // Only as large as a stored stream needs: a recycled buffer that held
    // one (of a step of this size) is then not zero-filled up to
    // max_length again.
    std::string compressed = BufferPool::Default().Take(
        stored ? input.size() + kStoredOverhead : max_length);
    if (!stored) {
      snappy::RawCompress(input.data(), input.size(), compressed.data(),
                          &length);
    }
    if (stored || (Storable(input) && !Shrinks(length, input.size()))) {
      length = WriteStored(input, compressed.data());
    }
    compressed.resize(length);
    output->swap(compressed);
    BufferPool::Default().Give(std::move(compressed));
    return;
  }
  if (stored) {
    // Written once, into a string of its own (`output` may hold `input`).
    std::string content = StoredHeader(input.size());
    content.reserve(content.size() + input.size());
    content.append(input.data(), input.size());
    output->swap(content);
    return;
  }
  thread_local char scratch[BufferPool::kMinBytes];
  snappy::RawCompress(input.data(), input.size(), scratch, &length);
  if (!Shrinks(length, input.size())) length = WriteStored(input, scratch);
  output->assign(scratch, length);
}

void SetDtypeAndShape(tensorflow::DataType dtype,
                      absl::Span<const int64_t> shape, TensorProto* proto) {
  proto->set_dtype(dtype);
  auto* proto_shape = proto->mutable_tensor_shape();
  for (int64_t dim : shape) proto_shape->add_dim()->set_size(dim);
}

// Dtype and shape of a numeric tensor into `proto`, its compressed `bytes`
// into `content` (the proto's tensor_content, or a string to move there);
// `stored` as SnappyCompress's.
void CompressNumeric(tensorflow::DataType dtype,
                     absl::Span<const int64_t> shape, absl::string_view bytes,
                     bool stored, std::string* content, TensorProto* proto) {
  SetDtypeAndShape(dtype, shape, proto);
  SnappyCompress(bytes, stored, content);
}

}  // namespace

namespace {

template <typename Dims>
absl::Status AppendShape(const TensorProto& proto, Dims* shape) {
  if (proto.tensor_shape().unknown_rank()) {
    return absl::InvalidArgumentError("Tensor shape has unknown rank.");
  }
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 16;
  int64_t elements = 1;
  for (const auto& dim : proto.tensor_shape().dim()) {
    if (dim.size() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Tensor shape has a negative dimension ", dim.size(), "."));
    }
    if (dim.size() > 0 && elements > kMaxElements / dim.size()) {
      return absl::InvalidArgumentError("Tensor shape is too large.");
    }
    elements *= dim.size();
    shape->push_back(dim.size());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ShapeFromProto(const TensorProto& proto,
                            std::vector<int64_t>* shape) {
  shape->reserve(shape->size() + proto.tensor_shape().dim_size());
  return AppendShape(proto, shape);
}

absl::Status ShapeFromProto(const TensorProto& proto,
                            absl::InlinedVector<int64_t, 4>* shape) {
  return AppendShape(proto, shape);
}

absl::Status CompressTensorAsProto(const TensorView& tensor,
                                   TensorProto* proto) {
  if (tensor.IsString()) {
    SetDtypeAndShape(tensor.dtype, tensor.shape, proto);
    REVERB_RETURN_IF_ERROR(CheckElements(tensor));
    std::string* content = proto->mutable_tensor_content();
    size_t total = 0;
    for (const std::string& s : tensor.strings) {
      PutVarint32(static_cast<uint32_t>(s.size()), content);
      total += s.size();
    }
    content->reserve(content->size() + total);
    for (const std::string& s : tensor.strings) content->append(s);
    return absl::OkStatus();
  }
  REVERB_RETURN_IF_ERROR(CheckElements(tensor));
  CompressNumeric(tensor.dtype, tensor.shape, tensor.bytes,
                  StoredWithoutTrying(tensor.bytes),
                  proto->mutable_tensor_content(), proto);
  return absl::OkStatus();
}

std::string StoredHeader(size_t length) {
  char header[kStoredOverhead];
  return std::string(header, WriteStoredHeader(length, header));
}

bool StoredWithoutTrying(absl::string_view bytes) {
  return bytes.size() >= kMinProbedBytes && Storable(bytes) &&
         !ProbeShrinks(bytes);
}

absl::Status CompressTensorAsProto(Tensor&& tensor, size_t headroom,
                                   TensorProto* proto) {
  if (headroom == 0) return CompressTensorAsProto(std::move(tensor), proto);
  std::string buffer = std::move(tensor.bytes);
  if (tensor.IsString() || headroom > buffer.size()) {
    return absl::InvalidArgumentError("No numeric elements after a headroom.");
  }
  TensorView elements(tensor);
  elements.bytes = absl::string_view(buffer).substr(headroom);
  REVERB_RETURN_IF_ERROR(CheckElements(elements));
  // Probed once: a compressible tensor is not probed again to compress it.
  const bool stored = StoredWithoutTrying(elements.bytes);
  if (stored && headroom == StoredHeader(elements.bytes.size()).size()) {
    SetDtypeAndShape(tensor.dtype, tensor.shape, proto);
    WriteStoredHeader(elements.bytes.size(), buffer.data());
    proto->set_tensor_content(std::move(buffer));
    return absl::OkStatus();
  }
  CompressNumeric(tensor.dtype, tensor.shape, elements.bytes, stored,
                  proto->mutable_tensor_content(), proto);
  BufferPool::Default().Give(std::move(buffer));
  return absl::OkStatus();
}

absl::Status CompressTensorAsProto(Tensor&& tensor, TensorProto* proto) {
  if (tensor.IsString()) {
    return CompressTensorAsProto(TensorView(tensor), proto);
  }
  REVERB_RETURN_IF_ERROR(CheckElements(tensor));
  // The proto takes the compressed bytes over without a copy; the tensor's
  // buffer holds them (small tensors) or is recycled (large ones).
  std::string content = std::move(tensor.bytes);
  CompressNumeric(tensor.dtype, tensor.shape, content,
                  StoredWithoutTrying(content), &content, proto);
  proto->set_tensor_content(std::move(content));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DecompressTensorFromProto(const TensorProto& proto) {
  return DecompressTensorFromProto(proto, proto.tensor_content());
}

absl::StatusOr<Tensor> DecompressTensorFromProto(const TensorProto& proto,
                                                 absl::string_view content) {
  Tensor tensor;
  tensor.dtype = proto.dtype();
  REVERB_RETURN_IF_ERROR(ShapeFromProto(proto, &tensor.shape));
  const int64_t n = tensor.NumElements();
  if (tensor.IsString()) {
    if (!content.empty() || proto.string_val_size() == 0) {
      REVERB_RETURN_IF_ERROR(DecodeStringList(content, n, &tensor.strings));
    } else {
      if (proto.string_val_size() != n) {
        return absl::InvalidArgumentError(
            absl::StrCat("String tensor of ", n, " elements has ",
                         proto.string_val_size(), " values."));
      }
      tensor.strings.assign(proto.string_val().begin(),
                            proto.string_val().end());
    }
    return tensor;
  }
  REVERB_ASSIGN_OR_RETURN(const int element_size, DataTypeSize(tensor.dtype));
  const size_t length = static_cast<size_t>(n) * element_size;
  REVERB_RETURN_IF_ERROR(CheckUncompressedLength(tensor, content, length));
  // A large tensor's buffer is a recycled one (already backed by memory,
  // and zeroed only beyond what it held before): the decoder overwrites it.
  if (length >= BufferPool::kMinBytes) {
    tensor.bytes = BufferPool::Default().Take(length);
  } else {
    tensor.bytes.resize(length);
  }
  if (!SnappyUncompress(content, tensor.bytes.data(), length)) {
    return absl::InvalidArgumentError("Corrupt compressed tensor content.");
  }
  return tensor;
}

absl::Status DecompressNumericInto(const TensorView& described,
                                   absl::string_view content, char* out,
                                   size_t length) {
  REVERB_RETURN_IF_ERROR(CheckUncompressedLength(described, content, length));
  if (!SnappyUncompress(content, out, length)) {
    return absl::InvalidArgumentError("Corrupt compressed tensor content.");
  }
  return absl::OkStatus();
}

void DeltaEncode(Tensor* tensor, bool encode) {
  if (tensor->shape.size() < 2) return;
  switch (tensor->dtype) {
    case tensorflow::DT_INT8:
    case tensorflow::DT_UINT8:
      return DeltaEncodeAs<uint8_t>(tensor, encode);
    case tensorflow::DT_INT16:
    case tensorflow::DT_UINT16:
      return DeltaEncodeAs<uint16_t>(tensor, encode);
    case tensorflow::DT_INT32:
    case tensorflow::DT_UINT32:
      return DeltaEncodeAs<uint32_t>(tensor, encode);
    case tensorflow::DT_INT64:
    case tensorflow::DT_UINT64:
      return DeltaEncodeAs<uint64_t>(tensor, encode);
    default:
      return;
  }
}

}  // namespace deepmind::reverb
