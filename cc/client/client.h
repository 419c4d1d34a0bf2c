// Client: a connection to a Reverb server and the calls it serves.
//
// Unary calls wait for the server to become ready until their timeout (an
// infinite timeout waits forever, as dm-reverb); Checkpoint fails fast
// (UNAVAILABLE if the server cannot be reached). They return the server's
// status (docs/wire-protocol.md, "Status codes"), or DEADLINE_EXCEEDED once
// `timeout` has passed. Writers and samplers made here share the channel and
// may outlive the Client.
//
// Thread-safe: the calls keep no state besides the shared channel.
#ifndef REVERB_CC_CLIENT_CLIENT_H_
#define REVERB_CC_CLIENT_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/client/connection.h"
#include "cc/client/legacy_writer.h"
#include "cc/client/sample_stream.h"
#include "cc/client/sampler.h"
#include "cc/client/trajectory_writer.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT Client {
 public:
  explicit Client(const std::string& server_address);

  const std::string& server_address() const {
    return connection_->server_address();
  }

  absl::Status MutatePriorities(const std::string& table,
                                absl::Span<const KeyWithPriority> updates,
                                absl::Span<const uint64_t> deletes,
                                absl::Duration timeout);

  absl::Status Reset(const std::string& table, absl::Duration timeout);

  absl::StatusOr<ServerInfoResponse> ServerInfo(absl::Duration timeout);

  // The directory the server wrote.
  absl::StatusOr<std::string> Checkpoint(absl::Duration timeout);

  // Legacy writer (see legacy_writer.h).
  absl::StatusOr<std::unique_ptr<Writer>> NewWriter(
      const WriterOptions& options);

  // Items of any cells of recent steps (see trajectory_writer.h).
  absl::StatusOr<std::unique_ptr<TrajectoryWriter>> NewTrajectoryWriter(
      std::shared_ptr<ChunkerOptions> options);

  absl::StatusOr<std::unique_ptr<Sampler>> NewSampler(
      const std::string& table, const SamplerOptions& options);

  // A stream driven from the calling thread (see sample_stream.h), once
  // the channel is connected (UNAVAILABLE if not within `connect_timeout`).
  absl::StatusOr<std::unique_ptr<SampleStream>> NewSampleStream(
      const std::string& table, absl::Duration connect_timeout);

 private:
  const std::shared_ptr<Connection> connection_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_CLIENT_H_
