#include "cc/support/keepalive.h"

#include <cstdint>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cc/support/log.h"

namespace deepmind::reverb {

absl::Duration KeepaliveFromEnvironment() {
  const char* value = std::getenv("REVERB_KEEPALIVE_MS");
  if (value == nullptr || *value == '\0') return kDefaultKeepalive;
  int64_t ms = 0;
  if (!absl::SimpleAtoi(value, &ms) || ms < 0) {
    Log(LogSeverity::kWarning,
        absl::StrCat("Ignoring REVERB_KEEPALIVE_MS=", value,
                     " (not a non-negative integer)."));
    return kDefaultKeepalive;
  }
  return ms == 0 ? absl::InfiniteDuration() : absl::Milliseconds(ms);
}

}  // namespace deepmind::reverb
