#include "cc/tensor/snappy_decode.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cc/support/varint.h"

namespace deepmind::reverb {
namespace {

// Patterns are widened with shifts on 8 loaded bytes, which puts later
// bytes in higher bits only on little-endian machines.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "snappy_decode assumes a little-endian machine");

// The fast paths write up to this many bytes past the end of an element
// (later elements overwrite them), so they run only where the output has
// that much room after the element; the last elements take the exact paths.
constexpr size_t kSlop = 16;

inline uint32_t LoadLittleEndian(const char* p, int bytes) {
  uint32_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return value;
}

// Output [op, op + length) repeats the output `offset` bytes back, which
// exists (offset <= op - start); op + length + kSlop fits in the output.
inline void CopyMatchFast(char* op, size_t offset, size_t length) {
  const char* src = op - offset;
  if (offset >= 8) {
    // Each read ends before the write that starts where it does, so it
    // reads only finished output even when the two overlap.
    if (offset >= 16) {
      for (size_t i = 0; i < length; i += 16) std::memcpy(op + i, src + i, 16);
    } else {
      for (size_t i = 0; i < length; i += 8) std::memcpy(op + i, src + i, 8);
    }
    return;
  }
  // A pattern shorter than 8 bytes is widened to 8 in a register and
  // written every `step` bytes, the largest multiple of the offset that is
  // at most 8. (Reading back output just written, a byte at a time or 8,
  // would stall on every step.) The bytes read past the pattern are masked
  // off; they lie in the output buffer, before op + 8.
  static constexpr unsigned char kStep[8] = {0, 8, 8, 6, 8, 5, 6, 7};
  uint64_t pattern;
  std::memcpy(&pattern, src, 8);
  pattern &= ~uint64_t{0} >> (64 - 8 * offset);
  for (size_t valid = offset; valid < 8; valid *= 2) {
    pattern |= pattern << (8 * valid);
  }
  const size_t step = kStep[offset];
  for (size_t i = 0; i < length; i += step) std::memcpy(op + i, &pattern, 8);
}

// The uncompressed length at *p, a varint32 (GetVarint32), refusing one
// whose fifth byte carries bits beyond the 32, as libsnappy does.
bool ReadLength(const char** p, const char* end, uint32_t* length) {
  const char* const start = *p;
  if (!GetVarint32(p, end, length)) return false;
  return *p - start < 5 || static_cast<unsigned char>(start[4]) <= 0x0f;
}

}  // namespace

bool SnappyUncompressedLength(absl::string_view compressed, size_t* length) {
  const char* p = compressed.data();
  uint32_t value = 0;
  if (!ReadLength(&p, p + compressed.size(), &value)) return false;
  *length = value;
  return true;
}

namespace {

// SnappyStoredOffset for an input of `compressed_size` bytes of which
// `head` holds the first ones (at least those before the stored bytes:
// kStoredHeadBytes are enough).
constexpr size_t kStoredHeadBytes = 16;
bool StoredOffset(absl::string_view head, size_t compressed_size, size_t length,
                  size_t* offset) {
  const char* p = head.data();
  const char* const end = p + head.size();
  uint32_t recorded = 0;
  if (!ReadLength(&p, end, &recorded) || recorded != length || p == end) {
    return false;
  }
  const unsigned char tag = static_cast<unsigned char>(*p++);
  if ((tag & 3) != 0) return false;
  size_t size = tag >> 2;
  if (size >= 60) {
    const int bytes = static_cast<int>(size) - 59;
    if (end - p < bytes) return false;
    size = LoadLittleEndian(p, bytes);
    p += bytes;
  }
  size = static_cast<uint32_t>(size + 1);  // As SnappyUncompress.
  const size_t before = static_cast<size_t>(p - head.data());
  if (size != length || compressed_size < before ||
      compressed_size - before != length) {
    return false;
  }
  *offset = before;
  return true;
}

}  // namespace

bool SnappyStoredOffset(absl::string_view compressed, size_t length,
                        size_t* offset) {
  return StoredOffset(compressed, compressed.size(), length, offset);
}

bool SnappyStoredOffset(const absl::Cord& compressed, size_t length,
                        size_t* offset) {
  char head[kStoredHeadBytes];
  size_t n = 0;
  for (absl::string_view piece : compressed.Chunks()) {
    const size_t take = std::min(sizeof(head) - n, piece.size());
    std::memcpy(head + n, piece.data(), take);
    n += take;
    if (n == sizeof(head)) break;
  }
  return StoredOffset(absl::string_view(head, n), compressed.size(), length,
                      offset);
}

bool SnappyUncompress(absl::string_view compressed, char* out, size_t length) {
  const char* ip = compressed.data();
  const char* const ip_end = ip + compressed.size();
  uint32_t recorded = 0;
  if (!ReadLength(&ip, ip_end, &recorded) || recorded != length) return false;
  char* op = out;
  char* const op_end = out + length;
  while (ip < ip_end) {
    const unsigned char tag = static_cast<unsigned char>(*ip++);
    const size_t room = op_end - op;
    size_t size;
    size_t offset;
    switch (tag & 3) {
      case 0: {  // Literal.
        size = tag >> 2;
        if (size >= 60) {
          const int bytes = static_cast<int>(size) - 59;
          if (ip_end - ip < bytes) return false;
          size = LoadLittleEndian(ip, bytes);
          ip += bytes;
        }
        // In 32 bits, as libsnappy: a length of 2^32 - 1 wraps to a literal
        // of 0 bytes.
        size = static_cast<uint32_t>(size + 1);
        const size_t available = ip_end - ip;
        if (size > available || size > room) return false;
        if (size <= 16 && available >= 16 && room >= 16) {
          std::memcpy(op, ip, 16);
        } else {
          std::memcpy(op, ip, size);
        }
        ip += size;
        op += size;
        continue;
      }
      case 1:  // Copy, 1-byte offset.
        if (ip_end - ip < 1) return false;
        size = ((tag >> 2) & 7) + 4;
        offset = (static_cast<size_t>(tag >> 5) << 8) |
                 static_cast<unsigned char>(*ip);
        ip += 1;
        break;
      case 2:  // Copy, 2-byte offset.
        if (ip_end - ip < 2) return false;
        size = (tag >> 2) + 1;
        offset = LoadLittleEndian(ip, 2);
        ip += 2;
        break;
      default:  // Copy, 4-byte offset.
        if (ip_end - ip < 4) return false;
        size = (tag >> 2) + 1;
        offset = LoadLittleEndian(ip, 4);
        ip += 4;
        break;
    }
    if (offset == 0 || offset > static_cast<size_t>(op - out) || size > room) {
      return false;
    }
    if (room >= size + kSlop) {
      CopyMatchFast(op, offset, size);
    } else {
      const char* const from = op - offset;
      for (size_t i = 0; i < size; ++i) op[i] = from[i];
    }
    op += size;
  }
  return op == op_end;
}

}  // namespace deepmind::reverb
