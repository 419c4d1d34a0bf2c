// Credentials as users give them: certificates and keys as PEM text or as
// the path of a file that holds it (as reverb.TlsOptions and the
// REVERB_TLS_* variables take them), and auth tokens.
#ifndef REVERB_CC_SUPPORT_CREDENTIALS_H_
#define REVERB_CC_SUPPORT_CREDENTIALS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

// `value` itself if it holds a PEM block ("-----BEGIN"), "" for "", else
// the contents of the file at that path. INVALID_ARGUMENT naming `what` and
// the path if the file cannot be read or holds no PEM block (the contents
// never appear in the message).
REVERB_EXPORT absl::StatusOr<std::string> LoadPem(const std::string& value,
                                                  const char* what);

// INVALID_ARGUMENT unless `token` is printable ASCII without spaces (as
// gRPC metadata must be); the message never holds the token.
REVERB_EXPORT absl::Status CheckAuthToken(const std::string& token);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_CREDENTIALS_H_
