// Log: libreverb's few log lines (failed periodic checkpoints, skipped
// checkpoints, ignored settings, progress of long work) go through one
// replaceable sink, so that a host routes them into its own logging (the
// Python package hands them to `logging.getLogger('reverb')`).
//
// The default sink writes "[reverb] <message>" to stderr. Nothing is logged
// per item, per request or per stream, but dm-reverb's warning of a
// TrajectoryWriter whose items pile up unflushed (once a second then).
#ifndef REVERB_CC_SUPPORT_LOG_H_
#define REVERB_CC_SUPPORT_LOG_H_

#include <functional>

#include "absl/strings/string_view.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

enum class LogSeverity { kInfo, kWarning, kError };

// Receives every line, one at a time per call, from any thread; `message`
// is a single line without a trailing newline.
using LogSink = std::function<void(LogSeverity, absl::string_view message)>;

// Hands `message` to the current sink. Thread-safe; a sink being replaced
// meanwhile still gets the lines it was handed.
REVERB_EXPORT void Log(LogSeverity severity, absl::string_view message);

// Replaces the sink; nullptr restores the default. Thread-safe.
REVERB_EXPORT void SetLogSink(LogSink sink);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_LOG_H_
