#include "cc/support/protobuf_log.h"

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "cc/support/log.h"
#include "cc/support/mutex.h"
#include "google/protobuf/stubs/logging.h"

namespace deepmind::reverb {
namespace {

// The invalid-UTF-8 lines: when the last one was logged, and how many were
// left out since.
struct Utf8Lines {
  Mutex mu;
  absl::Time last_logged ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  int64_t left_out ABSL_GUARDED_BY(mu) = 0;
};

Utf8Lines& GetUtf8Lines() {
  static Utf8Lines* lines = new Utf8Lines;
  return *lines;
}

void Handle(google::protobuf::LogLevel level, const char* filename, int line,
            const std::string& message) {
  std::string text =
      absl::StrCat("protobuf (", filename, ":", line,
                   "): ", absl::StripTrailingAsciiWhitespace(message));
  if (absl::StrContains(message, "contains invalid UTF-8 data")) {
    Utf8Lines& lines = GetUtf8Lines();
    MutexLock lock(&lines.mu);
    const absl::Time now = absl::Now();
    if (now - lines.last_logged < kInvalidUtf8LogInterval) {
      ++lines.left_out;
      return;
    }
    if (lines.left_out > 0) {
      absl::StrAppend(&text, " (and ", lines.left_out,
                      " more such lines since the last one)");
    }
    lines.last_logged = now;
    lines.left_out = 0;
  }
  Log(level == google::protobuf::LOGLEVEL_INFO      ? LogSeverity::kInfo
      : level == google::protobuf::LOGLEVEL_WARNING ? LogSeverity::kWarning
                                                    : LogSeverity::kError,
      text);
}

}  // namespace

void RouteProtobufLog() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&Handle); });
}

}  // namespace deepmind::reverb
