// Conversions between absl::Status and grpc::Status (codes are the same
// numbers in both). Stream breakage that gRPC reports as UNKNOWN "Stream
// removed" becomes UNAVAILABLE, so clients treat it as transient.
#ifndef REVERB_CC_WIRE_GRPC_STATUS_H_
#define REVERB_CC_WIRE_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "grpcpp/support/status.h"

namespace deepmind::reverb {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  if (status.error_code() == grpc::StatusCode::UNKNOWN &&
      absl::StrContains(status.error_message(), "Stream removed")) {
    return absl::UnavailableError(status.error_message());
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

// Errors after which a client may reconnect and try again: the server is
// unreachable, or it cancelled the call (it does so when it stops).
inline bool IsTransientError(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsCancelled(status);
}

}  // namespace deepmind::reverb

#endif  // REVERB_CC_WIRE_GRPC_STATUS_H_
