// LoadPem and CheckAuthToken (cc/support/credentials.h), and the loading of
// the client's and the server's security (channel_security.h,
// server_security.h).
#include <stdlib.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "cc/client/channel_security.h"
#include "cc/service/server_security.h"
#include "cc/support/credentials.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

constexpr char kPem[] =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(LoadPemTest, TextStaysFilesAreRead) {
  EXPECT_EQ(*LoadPem(kPem, "x"), kPem);
  EXPECT_EQ(*LoadPem("", "x"), "");
  EXPECT_EQ(*LoadPem(WriteTemp("cert.pem", kPem), "x"), kPem);
}

TEST(LoadPemTest, MissingOrNonPemFileNamesThePathNotTheContents) {
  absl::StatusOr<std::string> missing =
      LoadPem("/nonexistent/cert.pem", "TLS root certificates");
  ASSERT_TRUE(absl::IsInvalidArgument(missing.status()));
  EXPECT_TRUE(absl::StrContains(missing.status().message(),
                                "TLS root certificates file "
                                "'/nonexistent/cert.pem'"));
  absl::StatusOr<std::string> garbage =
      LoadPem(WriteTemp("garbage.pem", "secret-bytes"), "x");
  ASSERT_TRUE(absl::IsInvalidArgument(garbage.status()));
  EXPECT_FALSE(absl::StrContains(garbage.status().message(), "secret-bytes"));
}

TEST(CheckAuthTokenTest, RefusesSpacesAndControlsWithoutEchoing) {
  EXPECT_TRUE(CheckAuthToken("").ok());
  EXPECT_TRUE(CheckAuthToken("abc-DEF_123.~").ok());
  for (const char* bad : {"has space", "tab\there", "new\nline", "\x7f"}) {
    absl::Status status = CheckAuthToken(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad;
    EXPECT_FALSE(absl::StrContains(status.message(), bad));
  }
}

TEST(LoadChannelSecurityTest, ChecksPairsAndTls) {
  ChannelSecurity chain_only;
  chain_only.tls = true;
  chain_only.certificate_chain = kPem;
  EXPECT_TRUE(
      absl::IsInvalidArgument(LoadChannelSecurity(chain_only).status()));
  ChannelSecurity roots_without_tls;
  roots_without_tls.root_certificates = kPem;
  EXPECT_TRUE(
      absl::IsInvalidArgument(LoadChannelSecurity(roots_without_tls).status()));
  ChannelSecurity mutual;
  mutual.tls = true;
  mutual.root_certificates = WriteTemp("roots.pem", kPem);
  mutual.certificate_chain = kPem;
  mutual.private_key = kPem;
  absl::StatusOr<ChannelSecurity> loaded = LoadChannelSecurity(mutual);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->root_certificates, kPem);
}

TEST(LoadServerSecurityTest, ChecksTheCombinations) {
  ServerSecurity client_ca_without_tls;
  client_ca_without_tls.client_ca = kPem;
  EXPECT_TRUE(absl::IsInvalidArgument(
      LoadServerSecurity(client_ca_without_tls).status()));
  ServerSecurity require_without_ca;
  require_without_ca.certificate_chain = kPem;
  require_without_ca.private_key = kPem;
  require_without_ca.require_client_auth = true;
  EXPECT_TRUE(
      absl::IsInvalidArgument(LoadServerSecurity(require_without_ca).status()));
  require_without_ca.client_ca = kPem;
  EXPECT_TRUE(LoadServerSecurity(require_without_ca).ok());
  EXPECT_TRUE(IsLoopbackAddress("localhost"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackAddress("[::]"));
}

TEST(ChannelSecurityFromEnvironmentTest, ReadsTheVariables) {
  ::setenv("REVERB_TLS_ROOT_CERTIFICATES", kPem, 1);
  ::unsetenv("REVERB_AUTH_TOKEN");
  ::setenv("REVERB_AUTH_TOKEN_FILE", WriteTemp("token", " tok123\n").c_str(),
           1);
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromEnvironment();
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_TRUE(security->tls);
  EXPECT_EQ(security->root_certificates, kPem);
  EXPECT_EQ(security->auth_token, "tok123");
  ::setenv("REVERB_AUTH_TOKEN", "direct", 1);
  EXPECT_EQ(ChannelSecurityFromEnvironment()->auth_token, "direct");
  ::unsetenv("REVERB_AUTH_TOKEN");
  ::setenv("REVERB_AUTH_TOKEN_FILE", "/nonexistent/token", 1);
  EXPECT_TRUE(
      absl::IsInvalidArgument(ChannelSecurityFromEnvironment().status()));
  // A registration wins over the environment for its address only.
  ::unsetenv("REVERB_AUTH_TOKEN_FILE");
  ChannelSecurity registered;
  registered.auth_token = "registered";
  RegisterChannelSecurity("localhost:1234", registered);
  EXPECT_EQ(DefaultChannelSecurity("localhost:1234")->auth_token, "registered");
  EXPECT_EQ(DefaultChannelSecurity("localhost:1235")->auth_token, "");
  ::unsetenv("REVERB_TLS_ROOT_CERTIFICATES");
}

}  // namespace
}  // namespace deepmind::reverb
