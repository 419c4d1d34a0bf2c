// ServerLimits: what one client may cost the server (docs/concepts.md,
// "Server limits"). Every limit has a default no ordinary workload comes
// near; a client that goes past one gets a status naming it, and other
// clients and the stored data are unaffected.
#ifndef REVERB_CC_SERVICE_SERVER_LIMITS_H_
#define REVERB_CC_SERVICE_SERVER_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

// Half of the machine's physical memory, at least 1 GiB.
REVERB_EXPORT int64_t DefaultMaxHeldChunkBytes();

struct ServerLimits {
  // Bytes of the chunks one insert stream keeps (sent, and still listed in
  // its requests' `keep_chunk_keys`: its writer's keep-alive window),
  // whether or not items reference them yet: items may be evicted while the
  // stream keeps their chunks. Counted as serialized (compressed). A stream
  // that would pass it, or push all streams together past
  // `max_held_chunk_bytes`, fails with RESOURCE_EXHAUSTED naming the limit,
  // and its kept chunks are released (its items that are stored stay).
  int64_t max_held_chunk_bytes_per_stream = int64_t{1} << 30;
  int64_t max_held_chunk_bytes = DefaultMaxHeldChunkBytes();
  // Largest request message the server accepts (gRPC answers
  // RESOURCE_EXHAUSTED beyond it). Responses are not limited.
  int32_t max_message_bytes = int32_t{1} << 30;
  // HTTP/2 streams (calls) one connection may have open at once; a client's
  // further calls wait for one to end.
  int32_t max_concurrent_streams_per_connection = 1024;
  // Largest `num_samples` of a SampleStreamRequest (INVALID_ARGUMENT
  // beyond it); the table batches that serve it are at most this large.
  int64_t max_samples_per_request = int64_t{1} << 20;
  // A sample stream whose client has not taken a response (gRPC flow
  // control holds it) for this long is cancelled, and what it holds is
  // freed; the samples it had taken from the table are lost. Infinite: never.
  absl::Duration stalled_sample_stream_timeout = absl::Hours(1);
};

// `status` (of ByteBudget::Account::Add on a stream's held chunks) as the
// stream's error: a RESOURCE_EXHAUSTED that also says what is held and how
// to raise the limit. OK stays OK.
REVERB_EXPORT absl::Status HeldChunksExhausted(const absl::Status& status);

// INVALID_ARGUMENT naming the first limit that is not positive.
REVERB_EXPORT absl::Status ValidateServerLimits(const ServerLimits& limits);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SERVER_LIMITS_H_
