// Fuzzes DecompressTensorFromProto (cc/tensor/compression.h), which turns a
// chunk's TensorProto (from a server, a writer or a checkpoint) back into a
// tensor, and the delta decoding applied after it. A tensor it returns must
// hold the elements its shape says, compress back to a proto that
// decompresses to the same tensor, and survive delta decoding and encoding
// unchanged.
#include <cstddef>
#include <cstdint>

#include "cc/tensor/compression.h"
#include "cc/tensor/tensor.h"
#include "fuzz/fuzz_check.h"
#include "tensorflow/core/framework/tensor.pb.h"

namespace deepmind::reverb {
namespace {

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes &&
         a.strings == b.strings;
}

}  // namespace
}  // namespace deepmind::reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepmind::reverb;  // NOLINT(build/namespaces)
  tensorflow::TensorProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto tensor = DecompressTensorFromProto(proto);
  if (!tensor.ok()) return 0;
  FUZZ_CHECK(CheckElements(*tensor).ok());

  tensorflow::TensorProto again;
  FUZZ_CHECK(CompressTensorAsProto(*tensor, &again).ok());
  auto round_trip = DecompressTensorFromProto(again);
  FUZZ_CHECK(round_trip.ok() && SameTensor(*round_trip, *tensor));

  Tensor delta = *tensor;
  DeltaEncode(&delta, /*encode=*/false);
  DeltaEncode(&delta, /*encode=*/true);
  FUZZ_CHECK(SameTensor(delta, *tensor));
  return 0;
}
