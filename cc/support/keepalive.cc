#include "cc/support/keepalive.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"

namespace deepmind::reverb {

absl::Duration KeepaliveFromEnvironment() {
  const char* value = std::getenv("REVERB_KEEPALIVE_MS");
  if (value == nullptr || *value == '\0') return kDefaultKeepalive;
  int64_t ms = 0;
  if (!absl::SimpleAtoi(value, &ms) || ms < 0) {
    std::fprintf(stderr,
                 "[reverb] Ignoring REVERB_KEEPALIVE_MS=%s (not a "
                 "non-negative integer).\n",
                 value);
    return kDefaultKeepalive;
  }
  return ms == 0 ? absl::InfiniteDuration() : absl::Milliseconds(ms);
}

}  // namespace deepmind::reverb
