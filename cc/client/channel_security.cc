#include "cc/client/channel_security.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cc/support/credentials.h"
#include "cc/support/mutex.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

struct Registry {
  struct Entry {
    ChannelSecurity security;
    uint64_t registration = 0;
  };
  Mutex mu;
  absl::flat_hash_map<std::string, Entry> by_address ABSL_GUARDED_BY(mu);
  uint64_t registrations ABSL_GUARDED_BY(mu) = 0;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

// Adds `authorization: Bearer <token>` to the initial metadata of a call.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* value) : value_(value) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const value_;
};

class TokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : value_(absl::StrCat("Bearer ", token)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&value_);
  }

 private:
  const std::string value_;
};

}  // namespace

absl::StatusOr<ChannelSecurity> ChannelSecurityFromEnvironment() {
  ChannelSecurity security;
  security.root_certificates = Env("REVERB_TLS_ROOT_CERTIFICATES");
  security.certificate_chain = Env("REVERB_TLS_CERTIFICATE_CHAIN");
  security.private_key = Env("REVERB_TLS_PRIVATE_KEY");
  security.tls = !security.root_certificates.empty() ||
                 !security.certificate_chain.empty() ||
                 !security.private_key.empty();
  security.auth_token = Env("REVERB_AUTH_TOKEN");
  const std::string token_file = Env("REVERB_AUTH_TOKEN_FILE");
  if (security.auth_token.empty() && !token_file.empty()) {
    std::ifstream file(token_file, std::ios::binary);
    if (!file.is_open()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Cannot read REVERB_AUTH_TOKEN_FILE '", token_file, "'."));
    }
    std::stringstream contents;
    contents << file.rdbuf();
    security.auth_token =
        std::string(absl::StripAsciiWhitespace(contents.str()));
  }
  return security;
}

void RegisterChannelSecurity(const std::string& address,
                             ChannelSecurity security) {
  Registry& registry = GetRegistry();
  MutexLock lock(&registry.mu);
  registry.by_address[address] = {std::move(security),
                                  ++registry.registrations};
}

uint64_t ChannelSecurityRegistration(const std::string& address) {
  Registry& registry = GetRegistry();
  MutexLock lock(&registry.mu);
  auto it = registry.by_address.find(address);
  return it == registry.by_address.end() ? 0 : it->second.registration;
}

absl::StatusOr<ChannelSecurity> DefaultChannelSecurity(
    const std::string& address) {
  Registry& registry = GetRegistry();
  {
    MutexLock lock(&registry.mu);
    auto it = registry.by_address.find(address);
    if (it != registry.by_address.end()) return it->second.security;
  }
  return ChannelSecurityFromEnvironment();
}

absl::StatusOr<ChannelSecurity> LoadChannelSecurity(ChannelSecurity security) {
  REVERB_ASSIGN_OR_RETURN(
      security.root_certificates,
      LoadPem(security.root_certificates, "TLS root certificates"));
  REVERB_ASSIGN_OR_RETURN(
      security.certificate_chain,
      LoadPem(security.certificate_chain, "TLS certificate chain"));
  REVERB_ASSIGN_OR_RETURN(security.private_key,
                          LoadPem(security.private_key, "TLS private key"));
  if (security.certificate_chain.empty() != security.private_key.empty()) {
    return absl::InvalidArgumentError(
        "A client's TLS certificate chain and private key go together (mutual "
        "TLS): give both or neither.");
  }
  if (!security.tls && !(security.root_certificates.empty() &&
                         security.certificate_chain.empty() &&
                         security.server_name_override.empty())) {
    return absl::InvalidArgumentError(
        "TLS certificates or a server name override were given without TLS.");
  }
  REVERB_RETURN_IF_ERROR(CheckAuthToken(security.auth_token));
  return security;
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const std::string& address, const ChannelSecurity& security,
    grpc::ChannelArguments* args) {
  if (absl::StartsWith(address, "unix:")) {
    return security.secured() ? grpc::experimental::LocalCredentials(UDS)
                              : grpc::InsecureChannelCredentials();
  }
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.root_certificates;
  options.pem_cert_chain = security.certificate_chain;
  options.pem_private_key = security.private_key;
  if (!security.server_name_override.empty()) {
    args->SetSslTargetNameOverride(security.server_name_override);
  }
  return grpc::SslCredentials(options);
}

std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeTokenInterceptors(const ChannelSecurity& security) {
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!security.auth_token.empty()) {
    interceptors.push_back(
        std::make_unique<TokenInterceptorFactory>(security.auth_token));
  }
  return interceptors;
}

absl::Status ExplainConnectFailure(const absl::Status& status,
                                   const std::string& address,
                                   const ChannelSecurity& security,
                                   bool connecting) {
  // gRPC's texts (the last error of a channel that failed to connect).
  const absl::string_view message = status.message();
  auto failed = [&](absl::string_view cause) {
    return absl::UnauthenticatedError(absl::StrCat(
        "Unauthenticated: the TLS handshake with the Reverb server at ",
        address, " failed: ", cause));
  };
  if (absl::StrContains(message, "certificate verify failed")) {
    return failed(
        "its certificate does not verify against the client's root "
        "certificates (TlsOptions.root_certificates, "
        "REVERB_TLS_ROOT_CERTIFICATES).");
  }
  if (absl::StrContains(message, "is not in peer certificate")) {
    return failed(absl::StrCat(
        "its certificate does not name the host the client expects (",
        security.server_name_override.empty() ? address
                                              : security.server_name_override,
        "; see TlsOptions.server_name_override)."));
  }
  if (absl::StrContains(message, "wrong version number")) {
    return failed(
        "the server does not use TLS (it is plaintext): connect without "
        "TLS, or start the server with TLS.");
  }
  constexpr absl::string_view kSslFailed = "Ssl handshake failed: ";
  if (const size_t at = message.find(kSslFailed);
      at != absl::string_view::npos) {
    return failed(message.substr(at + kSslFailed.size()));
  }
  // A server that closes the connection during its setup refused the
  // handshake: a TLS server a plaintext client, a mutual TLS one a client
  // without a certificate it trusts. (Not over unix sockets: no TLS there.)
  if (connecting && !absl::StartsWith(address, "unix:") &&
      absl::StrContains(message, "Socket closed")) {
    if (!security.tls) {
      return absl::UnauthenticatedError(absl::StrCat(
          "Unauthenticated: the Reverb server at ", address,
          " closed the connection during its setup: it requires TLS (give "
          "the client tls=reverb.TlsOptions(root_certificates=...) or set "
          "REVERB_TLS_ROOT_CERTIFICATES)."));
    }
    return failed(
        security.certificate_chain.empty()
            ? "the server closed the connection: it requires a client "
              "certificate (mutual TLS: TlsOptions.certificate_chain and "
              "private_key)."
            : "the server closed the connection: it does not trust the "
              "client certificate.");
  }
  return status;
}

}  // namespace deepmind::reverb
