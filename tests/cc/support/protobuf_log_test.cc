#include "cc/support/protobuf_log.h"

#include <string>

#include "absl/strings/match.h"
#include "cc/support/log.h"
#include "gtest/gtest.h"
#include "reverb/cc/reverb_service.pb.h"
#include "tests/cc/support/captured_log.h"

namespace deepmind::reverb {
namespace {

// A ResetRequest whose table (a string field) is not UTF-8.
const std::string& InvalidUtf8Request() {
  static const std::string* bytes = new std::string("\x0a\x02\xff\xfe", 4);
  return *bytes;
}

TEST(ProtobufLogTest, InvalidUtf8IsLoggedOnceAMinuteThroughOurLog) {
  RouteProtobufLog();
  RouteProtobufLog();  // Again: nothing changes.
  CapturedLog log;
  for (int i = 0; i < 50; ++i) {
    ResetRequest request;
    EXPECT_FALSE(request.ParseFromString(InvalidUtf8Request()));
  }
  // The first line of the process may have come before (another test): at
  // most one in a minute, and ours when there is one.
  ASSERT_LE(log.lines().size(), 1);
  if (log.lines().size() == 1) {
    EXPECT_EQ(log.lines()[0].first, LogSeverity::kError);
    EXPECT_TRUE(absl::StartsWith(log.lines()[0].second, "protobuf ("));
    EXPECT_TRUE(absl::StrContains(log.lines()[0].second,
                                  "deepmind.reverb.ResetRequest.table"));
    EXPECT_TRUE(absl::StrContains(log.lines()[0].second, "invalid UTF-8 data"));
  }
}

TEST(ProtobufLogTest, OtherLinesAllGoThroughOurLog) {
  RouteProtobufLog();
  CapturedLog log;
  for (int i = 0; i < 3; ++i) {
    GOOGLE_LOG(WARNING) << "a warning " << i;
  }
  ASSERT_EQ(log.lines().size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(log.lines()[i].first, LogSeverity::kWarning);
    EXPECT_TRUE(absl::StrContains(log.lines()[i].second,
                                  "a warning " + std::to_string(i)));
  }
}

}  // namespace
}  // namespace deepmind::reverb
