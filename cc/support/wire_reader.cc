#include "cc/support/wire_reader.h"

namespace deepmind::reverb {

bool WireReader::ReadVarint(uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && remaining_ > 0; shift += 7) {
    const uint64_t byte = static_cast<unsigned char>(*it_);
    ++it_;
    --remaining_;
    result |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}

bool WireReader::ReadTag(int* field, WireType* type) {
  uint64_t tag;
  const size_t before = remaining_;
  if (!ReadVarint(&tag) || tag > UINT32_MAX || (tag >> 3) == 0) return false;
  // As protobuf: a tag takes at most 5 bytes (no padded encodings).
  if (before - remaining_ > 5) return false;
  const uint64_t wire_type = tag & 7;
  if (wire_type != kVarint && wire_type != kFixed64 &&
      wire_type != kLengthDelimited && wire_type != kFixed32) {
    return false;
  }
  *field = static_cast<int>(tag >> 3);
  *type = static_cast<WireType>(wire_type);
  return true;
}

bool WireReader::ReadLength(uint64_t* size) {
  const size_t before = remaining_;
  return ReadVarint(size) && before - remaining_ <= 5 && *size <= INT32_MAX &&
         *size <= remaining_;
}

bool WireReader::ReadLengthDelimited(absl::Cord* value) {
  uint64_t size;
  if (!ReadLength(&size)) return false;
  *value = absl::Cord::AdvanceAndRead(&it_, size);
  remaining_ -= size;
  return true;
}

bool WireReader::SkipLengthDelimited(uint64_t* size) {
  if (!ReadLength(size)) return false;
  absl::Cord::Advance(&it_, *size);
  remaining_ -= *size;
  return true;
}

bool WireReader::Skip(WireType type) {
  uint64_t size;
  switch (type) {
    case kVarint:
      return ReadVarint(&size);
    case kFixed64:
      size = 8;
      break;
    case kFixed32:
      size = 4;
      break;
    case kLengthDelimited:
      return SkipLengthDelimited(&size);
  }
  if (size > remaining_) return false;
  absl::Cord::Advance(&it_, size);
  remaining_ -= size;
  return true;
}

bool WireReader::ReadBytes(size_t n, std::string* out) {
  if (n > remaining_) return false;
  remaining_ -= n;
  while (n > 0) {
    const absl::string_view piece =
        absl::Cord::ChunkRemaining(it_).substr(0, n);
    out->append(piece.data(), piece.size());
    absl::Cord::Advance(&it_, piece.size());
    n -= piece.size();
  }
  return true;
}

bool WireReader::CopyField(int field, WireType type, std::string* out) {
  PutTag(field, type, out);
  uint64_t value;
  switch (type) {
    case kVarint:
      if (!ReadVarint(&value)) return false;
      PutVarint64(value, out);
      return true;
    case kFixed64:
      return ReadBytes(8, out);
    case kFixed32:
      return ReadBytes(4, out);
    case kLengthDelimited:
      if (!ReadLength(&value)) return false;
      PutVarint64(value, out);
      return ReadBytes(value, out);
  }
  return false;
}

}  // namespace deepmind::reverb
