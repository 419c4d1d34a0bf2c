// Random 64-bit identifiers for items, chunks and episodes.
//
// Keys are drawn uniformly from the whole uint64 range, as dm-reverb does, so
// independent writers never need to coordinate. Thread-safe.
#ifndef REVERB_CC_SUPPORT_KEY_GENERATOR_H_
#define REVERB_CC_SUPPORT_KEY_GENERATOR_H_

#include <cstdint>

#include "cc/support/export.h"

namespace deepmind::reverb {

REVERB_EXPORT uint64_t NewRandomKey();

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_KEY_GENERATOR_H_
