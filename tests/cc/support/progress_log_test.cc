#include "cc/support/progress_log.h"

#include <string>
#include <utility>
#include <vector>

#include "cc/support/log.h"
#include "gtest/gtest.h"
#include "tests/cc/support/captured_log.h"

namespace deepmind::reverb {
namespace {

using Lines = std::vector<std::string>;

constexpr uint64_t kMiB = 1 << 20;

TEST(LogTest, TheSinkGetsEveryLineWithItsSeverityUntilItIsReset) {
  {
    CapturedLog log;
    Log(LogSeverity::kWarning, "one");
    Log(LogSeverity::kError, "two");
    const std::vector<std::pair<LogSeverity, std::string>> expected = {
        {LogSeverity::kWarning, "one"}, {LogSeverity::kError, "two"}};
    EXPECT_EQ(log.lines(), expected);
  }
  testing::internal::CaptureStderr();
  Log(LogSeverity::kInfo, "back on stderr");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "[reverb] back on stderr\n");
}

TEST(ProgressLogTest, LogsAtMostOncePerIntervalWithRateAndTimeLeft) {
  CapturedLog log;
  absl::Time now = absl::UnixEpoch();
  ProgressLog progress("Saving checkpoint /c", 400 * kMiB, absl::Seconds(5),
                       [&] { return now; });
  now += absl::Seconds(1);
  progress.Add(20 * kMiB);  // Within the first interval: quiet.
  now += absl::Seconds(4);
  progress.Add(80 * kMiB);  // 100 MiB after 5 s.
  now += absl::Seconds(1);
  progress.Add(20 * kMiB);  // Within the next interval: quiet.
  now += absl::Seconds(4);
  progress.Update(200 * kMiB);  // 200 MiB after 10 s.
  now += absl::Seconds(10);
  progress.Update(400 * kMiB);
  progress.Done();
  EXPECT_EQ(
      log.messages(),
      (Lines{"Saving checkpoint /c: 100.0 of 400.0 MiB (25%), 20.0 MiB/s, "
             "about 15 s left",
             "Saving checkpoint /c: 200.0 of 400.0 MiB (50%), 20.0 MiB/s, "
             "about 10 s left",
             "Saving checkpoint /c: 400.0 of 400.0 MiB (100%), 20.0 MiB/s",
             "Saving checkpoint /c: done, 400.0 MiB in 20.0 s (20.0 MiB/s)"}));
  for (const auto& [severity, message] : log.lines()) {
    EXPECT_EQ(severity, LogSeverity::kInfo) << message;
  }
}

TEST(ProgressLogTest, WorkThatEndsWithinTheFirstIntervalLogsNothing) {
  CapturedLog log;
  absl::Time now = absl::UnixEpoch();
  ProgressLog progress("Loading", 10 * kMiB, absl::Seconds(5),
                       [&] { return now; });
  now += absl::Seconds(4);
  progress.Add(10 * kMiB);
  progress.Done();
  EXPECT_TRUE(log.messages().empty());
}

TEST(ProgressLogTest, AnUnknownTotalShowsBytesAndRateOnly) {
  CapturedLog log;
  absl::Time now = absl::UnixEpoch();
  ProgressLog progress("Loading", 0, absl::ZeroDuration(), [&] { return now; });
  now += absl::Seconds(2);
  progress.Add(3 * kMiB);
  EXPECT_EQ(log.messages(), Lines{"Loading: 3.0 MiB, 1.5 MiB/s"});
}

TEST(ProgressLogTest, TheIntervalComesFromTheEnvironment) {
  setenv("REVERB_PROGRESS_INTERVAL_MS", "250", 1);
  EXPECT_EQ(ProgressIntervalFromEnvironment(), absl::Milliseconds(250));
  setenv("REVERB_PROGRESS_INTERVAL_MS", "soon", 1);
  EXPECT_EQ(ProgressIntervalFromEnvironment(), kDefaultProgressInterval);
  unsetenv("REVERB_PROGRESS_INTERVAL_MS");
  EXPECT_EQ(ProgressIntervalFromEnvironment(), kDefaultProgressInterval);
}

}  // namespace
}  // namespace deepmind::reverb
