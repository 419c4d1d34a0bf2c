// Reads protocol buffer wire format from an absl::Cord, for code that parses
// a message only in part. Length-delimited values come out as sub-cords that
// share the input's memory instead of copies, so a large value can be kept
// where it was received (see Chunk::Parse in cc/core/chunk.h). A flat input
// (one piece: a small message, most gRPC slices) is read through pointers;
// one of several pieces through a Cord iterator.
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
  explicit WireReader(const absl::Cord& input);
  // Reads nothing (done()), until assigned.
  WireReader() = default;

  bool done() const { return remaining_ == 0; }

  // Every Read* returns false, leaving the reader in an unspecified state,
  // if the input is malformed or ends early.

  // The next field's number and wire type; false (as protobuf) for a tag
  // over 32 bits or longer than 5 bytes, field 0, or groups.
  bool ReadTag(int* field, WireType* type) {
    // Inline: a tag of one byte (a field up to 15) in a flat input.
    if (flat_ != nullptr && remaining_ > 0 && (*flat_ & 0x80) == 0) {
      if (!SplitTag(static_cast<unsigned char>(*flat_), field, type)) {
        return false;
      }
      ++flat_;
      --remaining_;
      return true;
    }
    return ReadTagSlow(field, type);
  }

  bool ReadVarint(uint64_t* value) {
    // Inline: a varint of one byte in a flat input.
    if (flat_ != nullptr && remaining_ > 0 && (*flat_ & 0x80) == 0) {
      *value = static_cast<unsigned char>(*flat_++);
      --remaining_;
      return true;
    }
    return ReadVarintSlow(value);
  }

  // A length-delimited value (after its tag), sharing the input's memory.
  // False (as protobuf) for a length over 31 bits or longer than 5 bytes,
  // here and wherever a length is read.
  bool ReadLengthDelimited(absl::Cord* value);
  // A length-delimited value (after its tag) as a reader of its own, which
  // reads it in place (no copy, no allocation) while this one moves past it.
  // `value` must not outlive the input.
  bool ReadLengthDelimited(WireReader* value);

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
  // `tag`'s field and wire type; false for field 0 or a group.
  static bool SplitTag(uint64_t tag, int* field, WireType* type) {
    const uint64_t wire_type = tag & 7;
    if ((tag >> 3) == 0 ||
        !(wire_type == kVarint || wire_type == kFixed64 ||
          wire_type == kLengthDelimited || wire_type == kFixed32)) {
      return false;
    }
    *field = static_cast<int>(tag >> 3);
    *type = static_cast<WireType>(wire_type);
    return true;
  }
  bool ReadTagSlow(int* field, WireType* type);
  bool ReadVarintSlow(uint64_t* value);
  // The next byte; remaining_ > 0.
  unsigned char NextByte() {
    --remaining_;
    if (flat_ != nullptr) return static_cast<unsigned char>(*flat_++);
    const unsigned char byte = static_cast<unsigned char>(*it_);
    ++it_;
    return byte;
  }
  // Moves past `n` <= remaining_ bytes.
  void Advance(size_t n);
  bool ReadBytes(size_t n, std::string* out);
  // A length-delimited value's length, within the input.
  bool ReadLength(uint64_t* size);

  const absl::Cord* input_ = nullptr;
  // A flat input: the next byte, and where the input's bytes begin.
  const char* flat_ = nullptr;
  const char* flat_begin_ = nullptr;
  // Else: the next byte.
  absl::Cord::CharIterator it_;
  size_t remaining_ = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_WIRE_READER_H_
