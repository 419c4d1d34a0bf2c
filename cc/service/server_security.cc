#include "cc/service/server_security.h"

#include <utility>

#include "absl/strings/match.h"
#include "cc/support/credentials.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {

absl::StatusOr<ServerSecurity> LoadServerSecurity(ServerSecurity security) {
  REVERB_ASSIGN_OR_RETURN(
      security.certificate_chain,
      LoadPem(security.certificate_chain, "TLS certificate chain"));
  REVERB_ASSIGN_OR_RETURN(security.private_key,
                          LoadPem(security.private_key, "TLS private key"));
  REVERB_ASSIGN_OR_RETURN(security.client_ca,
                          LoadPem(security.client_ca, "TLS client CA"));
  if (security.certificate_chain.empty() != security.private_key.empty()) {
    return absl::InvalidArgumentError(
        "A server's TLS certificate chain and private key go together: give "
        "both or neither.");
  }
  if (!security.tls() &&
      (!security.client_ca.empty() || security.require_client_auth)) {
    return absl::InvalidArgumentError(
        "Client certificates (root certificates, require_client_auth) need "
        "TLS: give the server's certificate chain and private key too.");
  }
  if (security.require_client_auth && security.client_ca.empty()) {
    return absl::InvalidArgumentError(
        "require_client_auth needs the root certificates that verify the "
        "clients' certificates.");
  }
  REVERB_RETURN_IF_ERROR(CheckAuthToken(security.auth_token));
  return security;
}

std::shared_ptr<grpc::ServerCredentials> TcpServerCredentials(
    const ServerSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      security.require_client_auth
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
      : security.client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.client_ca;
  options.pem_key_cert_pairs.push_back(
      {security.private_key, security.certificate_chain});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> UnixSocketServerCredentials(
    const ServerSecurity& security) {
  return security.secured() ? grpc::experimental::LocalServerCredentials(UDS)
                            : grpc::InsecureServerCredentials();
}

bool IsLoopbackAddress(const std::string& bind_address) {
  return bind_address == "localhost" || bind_address == "::1" ||
         bind_address == "[::1]" || bind_address == "ip6-localhost" ||
         absl::StartsWith(bind_address, "127.");
}

}  // namespace deepmind::reverb
