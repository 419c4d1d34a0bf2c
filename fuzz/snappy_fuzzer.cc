// Fuzzes our Snappy decoder (cc/tensor/snappy_decode.h) against libsnappy's
// on any bytes: both must agree on the uncompressed length, on whether the
// input is valid, and on what it decodes to.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cc/tensor/snappy_decode.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "snappy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input =
      deepmind::reverb::fuzzing::AsStringView(data, size);
  size_t length = 0;
  const bool has_length =
      deepmind::reverb::SnappyUncompressedLength(input, &length);
  size_t snappy_length = 0;
  FUZZ_CHECK(has_length == snappy::GetUncompressedLength(
                               input.data(), input.size(), &snappy_length));
  if (!has_length) return 0;
  FUZZ_CHECK(length == snappy_length);
  // Beyond 4 MiB (which takes an input of 200 KiB or more to be valid), only
  // the length is compared.
  if (length > (size_t{4} << 20)) return 0;
  std::string ours(length, '\0');
  std::string theirs(length, '\0');
  const bool ours_ok =
      deepmind::reverb::SnappyUncompress(input, ours.data(), length);
  const bool theirs_ok =
      snappy::RawUncompress(input.data(), input.size(), theirs.data());
  FUZZ_CHECK(ours_ok == theirs_ok);
  if (ours_ok) FUZZ_CHECK(ours == theirs);
  return 0;
}
