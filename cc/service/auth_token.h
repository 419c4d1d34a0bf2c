// AuthToken: the bearer token a server requires on every call (see
// docs/concepts.md, "Security"), and the reactor of a refused stream.
#ifndef REVERB_CC_SERVICE_AUTH_TOKEN_H_
#define REVERB_CC_SERVICE_AUTH_TOKEN_H_

#include <string>

#include "absl/status/status.h"
#include "cc/wire/grpc_status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"

namespace deepmind::reverb {

class AuthToken {
 public:
  // Empty: no token is required.
  explicit AuthToken(std::string token);

  bool required() const { return !expected_.empty(); }

  // OK if no token is required or `context` carries the metadata
  // `authorization: Bearer <token>` (compared in constant time); else
  // UNAUTHENTICATED saying whether the token was missing or wrong (never
  // what it was).
  absl::Status Check(const grpc::ServerContextBase& context) const;

 private:
  // "Bearer <token>"; empty if none is required.
  const std::string expected_;
};

// A stream finished with `status` as soon as it starts (deletes itself).
template <typename Request, typename Response>
class RefusedStreamReactor : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit RefusedStreamReactor(const absl::Status& status) {
    this->Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_AUTH_TOKEN_H_
