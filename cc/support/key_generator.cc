#include "cc/support/key_generator.h"

#include "absl/random/random.h"

namespace deepmind::reverb {

uint64_t NewRandomKey() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(absl::IntervalClosedClosed, gen, 0,
                                 UINT64_MAX);
}

}  // namespace deepmind::reverb
