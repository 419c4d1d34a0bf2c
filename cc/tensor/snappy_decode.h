// Decoding of Snappy's raw format, the compression of chunk tensors.
//
// The format (format_description.txt of the Snappy project): a varint32
// with the uncompressed length, then elements, each a tag byte whose low two
// bits give its kind:
//   00 literal: the next `length` bytes of input (length - 1 in the tag's
//      upper six bits, or in the 1-4 little-endian bytes after it when those
//      bits are 60-63);
//   01 copy, 4-11 bytes ((tag >> 2) & 7) + 4) from an 11-bit offset (the
//      tag's top three bits, then one byte);
//   10 copy, 1-64 bytes ((tag >> 2) + 1) from a 16-bit offset (2 bytes);
//   11 copy, 1-64 bytes from a 32-bit offset (4 bytes).
// A copy repeats output that starts `offset` bytes back; when the offset is
// shorter than the length, the copy repeats a pattern.
//
// Why our own: compression stays with libsnappy, but its decoder, as
// Debian builds it (no SSSE3), expands short patterns a byte at a time. Image
// frames are made of them (runs of one byte value, or of one 4-byte pixel),
// and a learner decompresses every frame it samples. This decoder widens a
// short pattern to 8 bytes in a register once per copy and then writes 8
// bytes at a time. Measured here on 84x84x4 uint8 frames: one value 18 us
// (libsnappy) against 3.9 us, a 4-byte pixel pattern 6.2 against 2.6, values
// 0-3 at random 29 against 15; incompressible data the same.
//
// Every input is checked: a corrupt or truncated input, or one whose
// length does not match, makes the call return false, and nothing is read
// or written outside the given buffers.
#ifndef REVERB_CC_TENSOR_SNAPPY_DECODE_H_
#define REVERB_CC_TENSOR_SNAPPY_DECODE_H_

#include <cstddef>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

// The uncompressed length recorded at the start of `compressed`; false if
// it is not a valid varint32.
REVERB_EXPORT bool SnappyUncompressedLength(absl::string_view compressed,
                                            size_t* length);

// Decodes `compressed` into `out`, which has room for exactly `length`
// bytes; true if `compressed` is valid and decodes to `length` bytes.
REVERB_EXPORT bool SnappyUncompress(absl::string_view compressed, char* out,
                                    size_t length);

// If `compressed` decodes to its own bytes from `*offset` on, all
// `length` of them (the uncompressed length, then one literal reaching to
// the end: how compression.h stores data that does not shrink), true and
// the offset of those bytes. Reads only the few bytes before them: a
// reader may copy the literal from wherever `compressed` came from (a file)
// instead.
REVERB_EXPORT bool SnappyStoredOffset(absl::string_view compressed,
                                      size_t length, size_t* offset);
// As above, for an input in pieces (a cord), of which only the first few
// bytes are read.
REVERB_EXPORT bool SnappyStoredOffset(const absl::Cord& compressed,
                                      size_t length, size_t* offset);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_TENSOR_SNAPPY_DECODE_H_
