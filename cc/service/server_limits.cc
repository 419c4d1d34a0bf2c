#include "cc/service/server_limits.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

int64_t DefaultMaxHeldChunkBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);     // NOLINT(runtime/int)
  const long page_size = sysconf(_SC_PAGE_SIZE);  // NOLINT(runtime/int)
  const int64_t physical =
      pages > 0 && page_size > 0 ? int64_t{pages} * page_size : 0;
  return std::max<int64_t>(physical / 2, int64_t{1} << 30);
}

absl::Status HeldChunksExhausted(const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(
      status.code(),
      absl::StrCat(
          "This insert stream keeps more chunk bytes than the server allows: ",
          status.message(),
          ". Its kept chunks are released (items it inserted stay). A "
          "writer keeps the chunks of its last steps for its next items "
          "(TrajectoryWriter num_keep_alive_refs, Writer "
          "max_sequence_length): keep fewer steps, or raise the limit (the "
          "reverb.ServerLimits field and reverb_server flag of that name)."));
}

absl::Status ValidateServerLimits(const ServerLimits& limits) {
  const struct {
    const char* name;
    int64_t value;
  } sizes[] = {
      {"max_held_chunk_bytes_per_stream",
       limits.max_held_chunk_bytes_per_stream},
      {"max_held_chunk_bytes", limits.max_held_chunk_bytes},
      {"max_message_bytes", limits.max_message_bytes},
      {"max_concurrent_streams_per_connection",
       limits.max_concurrent_streams_per_connection},
      {"max_samples_per_request", limits.max_samples_per_request},
  };
  for (const auto& size : sizes) {
    if (size.value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(size.name, " must be > 0, got ", size.value, "."));
    }
  }
  if (limits.stalled_sample_stream_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stalled_sample_stream_timeout must be > 0, got ",
        absl::FormatDuration(limits.stalled_sample_stream_timeout), "."));
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
