// Parsing protocol buffers that come from outside the process (a client, a
// server, a checkpoint file) without protobuf's log.
//
// A string field with invalid UTF-8 fails the parse, and protobuf logs an
// error for it too: hostile or fuzzed input repeats that log with every
// message and floods stderr. Where the failure is returned as a status,
// the log says nothing more, so it is silenced during the parse
// (protobuf's LogSilencer: process-wide while it lasts, so another
// thread's protobuf log of that moment is dropped too).
#ifndef REVERB_CC_SUPPORT_QUIET_PARSE_H_
#define REVERB_CC_SUPPORT_QUIET_PARSE_H_

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "google/protobuf/message_lite.h"
#include "google/protobuf/stubs/logging.h"

namespace deepmind::reverb {

// While one exists, protobuf logs nothing below FATAL.
using QuietProtobufLog = google::protobuf::LogSilencer;

// message->ParseFromArray(bytes), without the log.
inline bool ParseQuietly(absl::string_view bytes,
                         google::protobuf::MessageLite* message) {
  QuietProtobufLog quiet;
  return message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// The same of `bytes` in a cord, flattened (copied) only if it is not flat.
inline bool ParseQuietly(const absl::Cord& bytes,
                         google::protobuf::MessageLite* message) {
  const absl::optional<absl::string_view> flat = bytes.TryFlat();
  return flat.has_value() ? ParseQuietly(*flat, message)
                          : ParseQuietly(std::string(bytes), message);
}

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_QUIET_PARSE_H_
