// FUZZ_CHECK: the fuzz targets' assertion. A property that fails aborts,
// which libFuzzer (and the replay tests) report as a crash with the input
// that caused it.
#ifndef REVERB_FUZZ_FUZZ_CHECK_H_
#define REVERB_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                          \
  do {                                                                 \
    if (!(condition)) {                                                \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, \
                   __LINE__, #condition);                              \
      std::abort();                                                    \
    }                                                                  \
  } while (false)

#endif  // REVERB_FUZZ_FUZZ_CHECK_H_
