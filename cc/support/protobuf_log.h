// RouteProtobufLog: protobuf's own log lines go through libreverb's Log
// (log.h) instead of straight to stderr, so that a host routes them like
// ours (Python: the `reverb` logger).
//
// Input from outside the process can repeat one of them with every
// message: a string field with invalid UTF-8 fails the parse, and protobuf
// logs "String field ... contains invalid UTF-8 data" for each message
// (our own parses are quiet, quiet_parse.h; gRPC parses the unary requests
// and responses itself). That line is logged at most once a minute, with
// the number of lines left out meanwhile.
//
// Process-wide (protobuf has one handler): the servers and clients install
// it when they start; installing it again does nothing.
#ifndef REVERB_CC_SUPPORT_PROTOBUF_LOG_H_
#define REVERB_CC_SUPPORT_PROTOBUF_LOG_H_

#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

REVERB_EXPORT void RouteProtobufLog();

// The interval between two logged invalid-UTF-8 lines.
inline constexpr absl::Duration kInvalidUtf8LogInterval = absl::Minutes(1);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_PROTOBUF_LOG_H_
