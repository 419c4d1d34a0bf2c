// Reads protocol buffer wire format from an absl::Cord, for code that parses
// a message only in part. Length-delimited values come out as sub-cords that
// share the input's memory instead of copies, so a large value can be kept
// where it was received (see Chunk::Parse in cc/core/chunk.h).
#ifndef REVERB_CC_SUPPORT_WIRE_READER_H_
#define REVERB_CC_SUPPORT_WIRE_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "cc/support/export.h"
#include "cc/support/varint.h"

namespace deepmind::reverb {

class REVERB_EXPORT WireReader {
 public:
  // Reads `input`, which must outlive the reader.
  explicit WireReader(const absl::Cord& input)
      : it_(input.char_begin()), remaining_(input.size()) {}

  bool done() const { return remaining_ == 0; }

  // Every Read* returns false, leaving the reader in an unspecified state,
  // if the input is malformed or ends early.

  // The next field's number and wire type; false (as protobuf) for a tag
  // over 32 bits or longer than 5 bytes, field 0, or groups.
  bool ReadTag(int* field, WireType* type);

  bool ReadVarint(uint64_t* value);

  // A length-delimited value (after its tag), sharing the input's memory.
  // False (as protobuf) for a length over 31 bits or longer than 5 bytes,
  // here and wherever a length is read.
  bool ReadLengthDelimited(absl::Cord* value);

  // Skips the value, of wire type `type`, of the field whose tag was just
  // read.
  bool Skip(WireType type);
  // As Skip of a length-delimited value; `*size` is its length.
  bool SkipLengthDelimited(uint64_t* size);

  // Appends field `field` (tag and value) of wire type `type`, whose tag was
  // just read, to `out`: as it is on the wire, but for the tag and a varint
  // value, written in their shortest form (which parsers read the same).
  bool CopyField(int field, WireType type, std::string* out);

 private:
  bool ReadBytes(size_t n, std::string* out);
  // A length-delimited value's length, within the input.
  bool ReadLength(uint64_t* size);

  absl::Cord::CharIterator it_;
  size_t remaining_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_WIRE_READER_H_
