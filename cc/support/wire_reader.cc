#include "cc/support/wire_reader.h"

#include "absl/types/optional.h"

namespace deepmind::reverb {

WireReader::WireReader(const absl::Cord& input)
    : input_(&input), remaining_(input.size()) {
  if (absl::optional<absl::string_view> flat = input.TryFlat()) {
    flat_ = flat_begin_ = flat->data();
  } else {
    it_ = input.char_begin();
  }
}

void WireReader::Advance(size_t n) {
  remaining_ -= n;
  if (flat_ != nullptr) {
    flat_ += n;
  } else {
    absl::Cord::Advance(&it_, n);
  }
}

bool WireReader::ReadVarintSlow(uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && remaining_ > 0; shift += 7) {
    const uint64_t byte = NextByte();
    result |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}

bool WireReader::ReadTagSlow(int* field, WireType* type) {
  uint64_t tag;
  const size_t before = remaining_;
  // As protobuf: a tag takes at most 5 bytes (no padded encodings).
  return ReadVarint(&tag) && tag <= UINT32_MAX && before - remaining_ <= 5 &&
         SplitTag(tag, field, type);
}

bool WireReader::ReadLength(uint64_t* size) {
  const size_t before = remaining_;
  return ReadVarint(size) && before - remaining_ <= 5 && *size <= INT32_MAX &&
         *size <= remaining_;
}

bool WireReader::ReadLengthDelimited(absl::Cord* value) {
  uint64_t size;
  if (!ReadLength(&size)) return false;
  if (flat_ != nullptr) {
    *value = input_->Subcord(flat_ - flat_begin_, size);
    Advance(size);
  } else {
    *value = absl::Cord::AdvanceAndRead(&it_, size);
    remaining_ -= size;
  }
  return true;
}

bool WireReader::ReadLengthDelimited(WireReader* value) {
  uint64_t size;
  if (!ReadLength(&size)) return false;
  if (flat_ != nullptr) {  // Not the iterator, unused (and large).
    value->input_ = input_;
    value->flat_ = flat_;
    value->flat_begin_ = flat_begin_;
  } else {
    *value = *this;
  }
  value->remaining_ = size;
  Advance(size);
  return true;
}

bool WireReader::SkipLengthDelimited(uint64_t* size) {
  if (!ReadLength(size)) return false;
  Advance(*size);
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
  Advance(size);
  return true;
}

bool WireReader::ReadBytes(size_t n, std::string* out) {
  if (n > remaining_) return false;
  if (flat_ != nullptr) {
    out->append(flat_, n);
    Advance(n);
    return true;
  }
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
