// CapturedLog: the lines libreverb logs (cc/support/log.h) while it lives,
// for tests.
#ifndef REVERB_TESTS_CC_SUPPORT_CAPTURED_LOG_H_
#define REVERB_TESTS_CC_SUPPORT_CAPTURED_LOG_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "cc/support/log.h"

namespace deepmind::reverb {

// Captures the lines logged while it lives.
class CapturedLog {
 public:
  CapturedLog() {
    SetLogSink([this](LogSeverity severity, absl::string_view message) {
      lines_.emplace_back(severity, std::string(message));
    });
  }
  ~CapturedLog() { SetLogSink(nullptr); }
  std::vector<std::string> messages() const {
    std::vector<std::string> out;
    for (const auto& [severity, message] : lines_) out.push_back(message);
    return out;
  }
  const std::vector<std::pair<LogSeverity, std::string>>& lines() const {
    return lines_;
  }

 private:
  std::vector<std::pair<LogSeverity, std::string>> lines_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_TESTS_CC_SUPPORT_CAPTURED_LOG_H_
