#include "cc/support/credentials.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace deepmind::reverb {
namespace {

constexpr char kPemBegin[] = "-----BEGIN";

}  // namespace

absl::StatusOr<std::string> LoadPem(const std::string& value,
                                    const char* what) {
  if (value.empty() || absl::StrContains(value, kPemBegin)) return value;
  std::ifstream file(value, std::ios::binary);
  std::stringstream contents;
  if (file.is_open()) contents << file.rdbuf();
  if (!file.is_open() || file.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot read the ", what, " file '", value, "'."));
  }
  std::string pem = contents.str();
  if (!absl::StrContains(pem, kPemBegin)) {
    return absl::InvalidArgumentError(
        absl::StrCat("The ", what, " file '", value, "' holds no PEM block (",
                     kPemBegin, " ...)."));
  }
  return pem;
}

absl::Status CheckAuthToken(const std::string& token) {
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "An auth token must be printable ASCII without spaces.");
    }
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
