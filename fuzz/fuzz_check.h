// FUZZ_CHECK: the fuzz targets' assertion. A property that fails aborts,
// which libFuzzer (and the replay tests) report as a crash with the input
// that caused it. Same: how targets compare messages.
#ifndef REVERB_FUZZ_FUZZ_CHECK_H_
#define REVERB_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#include "google/protobuf/message_lite.h"

#define FUZZ_CHECK(condition)                                          \
  do {                                                                 \
    if (!(condition)) {                                                \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, \
                   __LINE__, #condition);                              \
      std::abort();                                                    \
    }                                                                  \
  } while (false)

namespace deepmind::reverb::fuzzing {

// Whether two messages hold the same fields: their serializations compare
// (MessageDifferencer would find a NaN different from itself).
inline bool Same(const google::protobuf::MessageLite& a,
                 const google::protobuf::MessageLite& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

}  // namespace deepmind::reverb::fuzzing

#endif  // REVERB_FUZZ_FUZZ_CHECK_H_
