#include "cc/core/local_table.h"

namespace deepmind::reverb {

uint64_t LibreverbIdentity() {
  // A constant keeps the value from looking like a pointer to anything.
  static const char anchor = 0;
  return reinterpret_cast<uintptr_t>(&anchor) ^ 0x52657665726221ull;
}

}  // namespace deepmind::reverb
