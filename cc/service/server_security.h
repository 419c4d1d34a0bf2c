// ServerSecurity: how a server's listeners are secured (see
// docs/concepts.md, "Security").
//
// - TLS on the TCP port: `certificate_chain` and `private_key` (the
//   server's certificate). With `client_ca` the server verifies the
//   certificates clients present against it; with `require_client_auth` too
//   a client without one is refused (mutual TLS).
// - A token (`auth_token`): every call must carry it (auth_token.h), on
//   both listeners.
// - The unix socket, which only processes of this host with access to its
//   file reach, uses gRPC's local credentials once the server is secured
//   (TLS or a token; plain ones otherwise): the token is what guards it.
#ifndef REVERB_CC_SERVICE_SERVER_SECURITY_H_
#define REVERB_CC_SERVICE_SERVER_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cc/support/export.h"
#include "grpcpp/security/server_credentials.h"

namespace deepmind::reverb {

struct ServerSecurity {
  // PEM text, or (before LoadServerSecurity) paths of files holding it.
  std::string certificate_chain;
  std::string private_key;
  std::string client_ca;
  bool require_client_auth = false;
  // Empty: no token.
  std::string auth_token;

  bool tls() const { return !certificate_chain.empty(); }
  bool secured() const { return tls() || !auth_token.empty(); }
};

// `security` with its files read (LoadPem, cc/support/credentials.h).
// INVALID_ARGUMENT for an unreadable file, a certificate chain without its
// private key (or the reverse), a client CA or require_client_auth without
// TLS, require_client_auth without a client CA, or a token that
// CheckAuthToken refuses.
REVERB_EXPORT absl::StatusOr<ServerSecurity> LoadServerSecurity(
    ServerSecurity security);

// The credentials of the TCP and the unix socket listeners (of a loaded
// `security`).
std::shared_ptr<grpc::ServerCredentials> TcpServerCredentials(
    const ServerSecurity& security);
std::shared_ptr<grpc::ServerCredentials> UnixSocketServerCredentials(
    const ServerSecurity& security);

// True for the addresses that only this host reaches ("localhost",
// 127.0.0.0/8, "::1").
REVERB_EXPORT bool IsLoopbackAddress(const std::string& bind_address);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SERVER_SECURITY_H_
