// Tensor <-> TensorProto with Snappy compression, as dm-reverb stores chunk
// data on the wire and in checkpoints.
//
// Numeric tensors: dtype, shape, and the snappy-compressed row-major bytes in
// `tensor_content`. Data that snappy does not shrink by an eighth (judged
// from a few blocks of a tensor of 16 KiB or more) is stored instead: a
// snappy stream of one literal, which any snappy decoder reads (dm-reverb's
// too), written and read back with a copy. String tensors: uncompressed, in
// TensorFlow's string-list encoding of `tensor_content` (all lengths as
// varint32, then all bytes); `string_val` is accepted when decoding.
//
// Delta encoding (optional, per chunk) stores integer tensors of rank >= 2 as
// differences between consecutive rows (wrap-around arithmetic on the
// same-width unsigned type); other tensors are left unchanged.
#ifndef REVERB_CC_TENSOR_COMPRESSION_H_
#define REVERB_CC_TENSOR_COMPRESSION_H_

#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cc/support/export.h"
#include "cc/tensor/tensor.h"
#include "tensorflow/core/framework/tensor.pb.h"

namespace deepmind::reverb {

// Fills `proto` (which may live on an arena: it is written in place, never
// copied in from a temporary). INVALID_ARGUMENT if `tensor` does not hold
// the elements its shape says.
REVERB_EXPORT absl::Status CompressTensorAsProto(
    const TensorView& tensor, tensorflow::TensorProto* proto);
// As above, but a numeric tensor's buffer is reused for the compressed
// bytes, which the proto then owns: a large tensor takes no second buffer
// (and no fresh pages).
REVERB_EXPORT absl::Status CompressTensorAsProto(
    Tensor&& tensor, tensorflow::TensorProto* proto);
// As above, for a numeric tensor whose buffer holds `headroom` bytes before
// its elements (tensor.bytes is both). Where the elements are stored and
// `headroom` is the StoredHeader size for their size, the stored stream's
// header is written there and the buffer becomes the proto's content as it is:
// a large incompressible tensor is not copied.
REVERB_EXPORT absl::Status CompressTensorAsProto(
    Tensor&& tensor, size_t headroom, tensorflow::TensorProto* proto);

// The bytes a stored stream of `length` bytes holds before them.
REVERB_EXPORT std::string StoredHeader(size_t length);

// Whether the elements `bytes` of a numeric tensor are stored without a try
// at compressing them (16 KiB or more, and a few probes do not shrink): the
// content CompressTensorAsProto makes of them is then StoredHeader + `bytes`.
REVERB_EXPORT bool StoredWithoutTrying(absl::string_view bytes);

// INVALID_ARGUMENT if the proto is malformed (bad shape, corrupt snappy data,
// a size that does not match the shape).
REVERB_EXPORT absl::StatusOr<Tensor> DecompressTensorFromProto(
    const tensorflow::TensorProto& proto);
// As above, with `content` instead of the proto's `tensor_content` (a
// tensor whose content lies elsewhere: ParseChunkHeader, cc/core/chunk.h).
REVERB_EXPORT absl::StatusOr<Tensor> DecompressTensorFromProto(
    const tensorflow::TensorProto& proto, absl::string_view content);

// Decompresses the content of a numeric tensor of `length` bytes into
// `out` (room for exactly `length`), as DecompressTensorFromProto but into
// memory of the caller's: a sampler decompresses a chunk tensor straight
// into a batch's row. `described` (dtype and shape, no data) names the
// tensor in errors. INVALID_ARGUMENT as DecompressTensorFromProto.
REVERB_EXPORT absl::Status DecompressNumericInto(const TensorView& described,
                                                 absl::string_view content,
                                                 char* out, size_t length);

// The shape of `proto`; INVALID_ARGUMENT for an unknown rank, a negative
// dimension or more elements than a tensor may hold.
REVERB_EXPORT absl::Status ShapeFromProto(const tensorflow::TensorProto& proto,
                                          std::vector<int64_t>* shape);
REVERB_EXPORT absl::Status ShapeFromProto(
    const tensorflow::TensorProto& proto,
    absl::InlinedVector<int64_t, 4>* shape);

// In place; `encode` false undoes an encoding.
REVERB_EXPORT void DeltaEncode(Tensor* tensor, bool encode);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_TENSOR_COMPRESSION_H_
