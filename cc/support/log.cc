#include "cc/support/log.h"

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "cc/support/mutex.h"

namespace deepmind::reverb {
namespace {

struct SinkState {
  Mutex mu;
  std::shared_ptr<const LogSink> sink ABSL_GUARDED_BY(mu);
};

// Never destroyed: threads may log while the process exits.
SinkState& State() {
  static auto* state = new SinkState();
  return *state;
}

void LogToStderr(absl::string_view message) {
  std::string line = "[reverb] ";
  line.append(message.data(), message.size());
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

void Log(LogSeverity severity, absl::string_view message) {
  std::shared_ptr<const LogSink> sink;
  {
    MutexLock lock(&State().mu);
    sink = State().sink;
  }
  // Outside the lock: a sink may take its host's locks (Python's GIL).
  if (sink == nullptr) {
    LogToStderr(message);
  } else {
    (*sink)(severity, message);
  }
}

void SetLogSink(LogSink sink) {
  MutexLock lock(&State().mu);
  State().sink = sink == nullptr
                     ? nullptr
                     : std::make_shared<const LogSink>(std::move(sink));
}

}  // namespace deepmind::reverb
