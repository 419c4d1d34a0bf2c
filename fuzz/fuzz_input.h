// Helpers that present a fuzz input as the parsers receive bytes.
#ifndef REVERB_FUZZ_FUZZ_INPUT_H_
#define REVERB_FUZZ_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace deepmind::reverb::fuzzing {

// The input as an absl::Cord of pieces of `piece` bytes that reference it
// (the way the server keeps large gRPC slices), so that parsers meet piece
// boundaries anywhere in a value. absl copies pieces shorter than 512 bytes
// into their neighbours: only larger ones stay apart. `data` must outlive
// the cord.
inline absl::Cord FragmentedCord(const uint8_t* data, size_t size,
                                 size_t piece = 600) {
  absl::Cord cord;
  for (size_t offset = 0; offset < size; offset += piece) {
    const absl::string_view bytes(reinterpret_cast<const char*>(data) + offset,
                                  std::min(piece, size - offset));
    cord.Append(absl::MakeCordFromExternal(bytes, [] {}));
  }
  return cord;
}

inline absl::string_view AsStringView(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace deepmind::reverb::fuzzing

#endif  // REVERB_FUZZ_FUZZ_INPUT_H_
