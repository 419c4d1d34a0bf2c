// ChannelSecurity: how a client's channels to a server are secured (see
// docs/concepts.md, "Security").
//
// - TLS (`tls`): the server's certificate must verify against
//   `root_certificates` (the system's roots if empty) and name the host of
//   the address (or `server_name_override`). With `certificate_chain` and
//   `private_key` the client presents a certificate of its own (mutual
//   TLS).
// - A token (`auth_token`): every call carries the metadata
//   `authorization: Bearer <token>`, which a server started with that token
//   requires (UNAUTHENTICATED otherwise).
// - Over a `unix:` address TLS does not apply: a secured channel (TLS or a
//   token) uses gRPC's local credentials there, an unsecured one plain
//   ones, as the server's unix socket (server_security.h).
//
// Clients made without one use DefaultChannelSecurity: what was registered
// for the address (the Python datasets and TFClient register theirs, for
// the TensorFlow kernels, which make their own clients), else the
// environment's.
#ifndef REVERB_CC_CLIENT_CHANNEL_SECURITY_H_
#define REVERB_CC_CLIENT_CHANNEL_SECURITY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cc/support/export.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace deepmind::reverb {

struct ChannelSecurity {
  bool tls = false;
  // PEM text, or (before LoadChannelSecurity) paths of files holding it.
  std::string root_certificates;
  std::string certificate_chain;
  std::string private_key;
  std::string server_name_override;
  // Empty: no token.
  std::string auth_token;

  bool secured() const { return tls || !auth_token.empty(); }
};

// REVERB_TLS_ROOT_CERTIFICATES, REVERB_TLS_CERTIFICATE_CHAIN and
// REVERB_TLS_PRIVATE_KEY (any of them set turns TLS on; PEM or paths), and
// REVERB_AUTH_TOKEN, else the contents of the file REVERB_AUTH_TOKEN_FILE
// names (surrounding whitespace stripped). INVALID_ARGUMENT if that file
// cannot be read.
REVERB_EXPORT absl::StatusOr<ChannelSecurity> ChannelSecurityFromEnvironment();

// Clients made later without a ChannelSecurity use `security` for
// `address` (process-wide; the latest registration wins).
REVERB_EXPORT void RegisterChannelSecurity(const std::string& address,
                                           ChannelSecurity security);

// A number that changes with every registration for `address` (0 before
// the first): a client made from the registry is out of date once it
// differs from the number at its making.
REVERB_EXPORT uint64_t ChannelSecurityRegistration(const std::string& address);

// The registered security of `address`, else the environment's.
REVERB_EXPORT absl::StatusOr<ChannelSecurity> DefaultChannelSecurity(
    const std::string& address);

// `security` with its files read (LoadPem, cc/support/credentials.h).
// INVALID_ARGUMENT for an unreadable file, a certificate chain without its
// private key (or the reverse), certificates without `tls`, or a token that
// CheckAuthToken refuses.
REVERB_EXPORT absl::StatusOr<ChannelSecurity> LoadChannelSecurity(
    ChannelSecurity security);

// The credentials of a channel to `address` (a loaded `security`); sets the
// TLS name override in `args`.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const std::string& address, const ChannelSecurity& security,
    grpc::ChannelArguments* args);

// Interceptors that add the token to every call (none without one).
std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeTokenInterceptors(const ChannelSecurity& security);

// A failure to connect to `address` (the status of a call that could not
// be made) as the user needs it: UNAUTHENTICATED naming the cause if the
// TLS handshake failed (a certificate that does not verify, TLS against a
// plaintext server or the reverse); else `status` unchanged. `connecting`:
// `status` is the error of a connection attempt (the channel has not
// connected since), so that a connection the server closed at once means it
// refused the handshake (and not that it went away in the middle of a call).
absl::Status ExplainConnectFailure(const absl::Status& status,
                                   const std::string& address,
                                   const ChannelSecurity& security,
                                   bool connecting);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_CHANNEL_SECURITY_H_
