#include "cc/service/server_limits.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

TEST(ServerLimitsTest, DefaultsAreValidAndGenerous) {
  const ServerLimits limits;
  EXPECT_TRUE(ValidateServerLimits(limits).ok());
  EXPECT_GE(limits.max_held_chunk_bytes, int64_t{1} << 30);
  EXPECT_GE(limits.max_held_chunk_bytes,
            limits.max_held_chunk_bytes_per_stream);
  EXPECT_EQ(limits.stalled_sample_stream_timeout, absl::Hours(1));
}

TEST(ServerLimitsTest, NonPositiveLimitIsInvalidArgumentNamingIt) {
  ServerLimits limits;
  limits.max_samples_per_request = 0;
  absl::Status status = ValidateServerLimits(limits);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(Contains(status, "max_samples_per_request must be > 0, got 0"))
      << status;

  limits = ServerLimits();
  limits.stalled_sample_stream_timeout = absl::ZeroDuration();
  status = ValidateServerLimits(limits);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(Contains(status, "stalled_sample_stream_timeout")) << status;

  limits = ServerLimits();
  limits.stalled_sample_stream_timeout = absl::InfiniteDuration();
  EXPECT_TRUE(ValidateServerLimits(limits).ok());
}

TEST(ServerLimitsTest, HeldChunksExhaustedKeepsTheCodeAndExplains) {
  EXPECT_TRUE(HeldChunksExhausted(absl::OkStatus()).ok());
  const absl::Status status = HeldChunksExhausted(
      absl::ResourceExhaustedError("max_held_chunk_bytes (10 bytes) ..."));
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_TRUE(Contains(status, "max_held_chunk_bytes (10 bytes)")) << status;
  EXPECT_TRUE(Contains(status, "num_keep_alive_refs")) << status;
  EXPECT_TRUE(Contains(status, "raise the limit")) << status;
}

}  // namespace
}  // namespace deepmind::reverb
