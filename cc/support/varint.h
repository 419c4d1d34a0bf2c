// Little-endian base-128 varints (7 bits a byte, high bit set on all but
// the last), as protocol buffers, TensorFlow's string lists and Snappy's
// length header write them; and protocol buffer field tags, for the code
// that writes wire bytes itself.
#ifndef REVERB_CC_SUPPORT_VARINT_H_
#define REVERB_CC_SUPPORT_VARINT_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace deepmind::reverb {

inline void PutVarint64(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

inline void PutVarint32(uint32_t value, std::string* out) {
  PutVarint64(value, out);
}

// Bytes PutVarint64 writes for `value`.
inline size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

// Protocol buffer wire types (groups, 3 and 4, are not supported).
enum WireType {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kFixed32 = 5,
};

// The tag of field `field` of wire type `type`.
inline void PutTag(int field, WireType type, std::string* out) {
  PutVarint32((static_cast<uint32_t>(field) << 3) | type, out);
}

// Reads a varint32 of at most five bytes from [*p, end) and advances *p
// past it; false if the input ends first or the varint is longer.
inline bool GetVarint32(const char** p, const char* end, uint32_t* value) {
  uint32_t result = 0;
  for (int shift = 0; shift <= 28 && *p < end; shift += 7) {
    const uint32_t byte = static_cast<unsigned char>(*(*p)++);
    result |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_VARINT_H_
