// Uniform random 64-bit keys for items, chunks and episodes (as dm-reverb,
// keys are drawn client-side and assumed unique).
#ifndef REVERB_CC_SUPPORT_RANDOM_KEY_H_
#define REVERB_CC_SUPPORT_RANDOM_KEY_H_

#include <cstdint>

#include "absl/random/random.h"

namespace deepmind::reverb {

inline uint64_t NewRandomKey() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_RANDOM_KEY_H_
