// Fuzzes WireReader (cc/support/wire_reader.h) over any bytes: two readers
// walk the input field by field, one copying every field (CopyField), one
// skipping or reading it (Skip, ReadLengthDelimited). They must agree on
// every tag and on where the input stops being valid. The copies of a valid
// input add up to the input with its tags and varints in their shortest
// form (protobuf reads both the same): no longer than the input, and copied
// again, unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cc/support/wire_reader.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"

using deepmind::reverb::kLengthDelimited;
using deepmind::reverb::WireReader;
using deepmind::reverb::WireType;

namespace {

// Every field of `input`, which is valid, copied.
std::string CopyAll(const absl::Cord& input) {
  WireReader reader(input);
  std::string copy;
  while (!reader.done()) {
    int field;
    WireType type;
    FUZZ_CHECK(reader.ReadTag(&field, &type));
    FUZZ_CHECK(reader.CopyField(field, type, &copy));
  }
  return copy;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Cord input =
      deepmind::reverb::fuzzing::FragmentedCord(data, size);
  WireReader copier(input);
  WireReader reader(input);
  std::string copy;
  while (!copier.done()) {
    FUZZ_CHECK(!reader.done());
    int copied_field, field;
    WireType copied_type, type;
    const bool tag_ok = copier.ReadTag(&copied_field, &copied_type);
    FUZZ_CHECK(reader.ReadTag(&field, &type) == tag_ok);
    if (!tag_ok) return 0;
    FUZZ_CHECK(field == copied_field && type == copied_type && field > 0);
    const bool copied = copier.CopyField(field, type, &copy);
    bool read;
    if (type == kLengthDelimited) {
      absl::Cord value;
      read = reader.ReadLengthDelimited(&value);
      FUZZ_CHECK(!read || value.size() <= input.size());
    } else {
      read = reader.Skip(type);
    }
    FUZZ_CHECK(copied == read);
    if (!read) return 0;
  }
  FUZZ_CHECK(reader.done());
  FUZZ_CHECK(copy.size() <= input.size());
  FUZZ_CHECK(CopyAll(absl::Cord(copy)) == copy);
  return 0;
}
