#include "cc/service/auth_token.h"

#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace deepmind::reverb {
namespace {

// Takes as long for every `given` of one length, whatever its bytes.
bool ConstantTimeEquals(absl::string_view given, absl::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i]) ^
            static_cast<unsigned char>(expected[i % expected.size()]);
  }
  return diff == 0;
}

constexpr char kHowTo[] =
    "this Reverb server requires every call to carry the metadata "
    "'authorization: Bearer <token>' (the clients' auth_token argument or "
    "REVERB_AUTH_TOKEN).";

}  // namespace

AuthToken::AuthToken(std::string token)
    : expected_(token.empty() ? "" : absl::StrCat("Bearer ", token)) {}

absl::Status AuthToken::Check(const grpc::ServerContextBase& context) const {
  if (!required()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat("Unauthenticated: no auth token: ", kHowTo));
  }
  if (!ConstantTimeEquals(
          absl::string_view(it->second.data(), it->second.size()), expected_)) {
    return absl::UnauthenticatedError(
        absl::StrCat("Unauthenticated: wrong auth token: ", kHowTo));
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
