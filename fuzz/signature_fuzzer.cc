// Fuzzes signature decoding (cc/tensor/signature.h): a table's signature as
// a client receives it in ServerInfo (or a server from its configuration),
// flattened and described. Every flattened spec must be describable, and
// every shape compatible with itself.
#include <cstddef>
#include <cstdint>

#include "cc/tensor/signature.h"
#include "fuzz/fuzz_check.h"
#include "tensorflow/core/protobuf/struct.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepmind::reverb;  // NOLINT(build/namespaces)
  tensorflow::StructuredValue signature;
  if (!signature.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto specs = FlattenSignature(signature);
  if (!specs.ok()) return 0;
  DescribeSignature(*specs);
  for (const SignatureSpec& spec : *specs) {
    FUZZ_CHECK(ShapesCompatible(spec.shape, spec.shape));
    FUZZ_CHECK(ShapesCompatible(spec.shape, std::nullopt));
    FUZZ_CHECK(!DataTypeName(spec.dtype).empty());
    FUZZ_CHECK(!ShapeString(spec.shape).empty());
  }
  return 0;
}
