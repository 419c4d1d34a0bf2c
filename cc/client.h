// Client: a connection to a Reverb server and the calls it serves.
//
// The channel is insecure, has unlimited message sizes, a 30 s reconnect
// backoff cap and the round_robin load-balancing policy (as dm-reverb), so
// an address that resolves to several servers spreads streams over them.
//
// Unary calls wait for the server to become ready until their timeout (an
// infinite timeout waits forever, as dm-reverb); Checkpoint fails fast.
// Writers and samplers made here share the channel and may outlive the
// Client.
#ifndef REVERB_CC_CLIENT_H_
#define REVERB_CC_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/sample_stream.h"
#include "cc/sampler.h"
#include "cc/support/export.h"
#include "cc/writer.h"
#include "reverb/cc/reverb_service.grpc.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT Client {
 public:
  explicit Client(const std::string& server_address);

  const std::string& server_address() const { return server_address_; }

  absl::Status MutatePriorities(const std::string& table,
                                absl::Span<const KeyWithPriority> updates,
                                absl::Span<const uint64_t> deletes,
                                absl::Duration timeout);

  absl::Status Reset(const std::string& table, absl::Duration timeout);

  absl::StatusOr<ServerInfoResponse> ServerInfo(absl::Duration timeout);

  // The directory the server wrote.
  absl::StatusOr<std::string> Checkpoint(absl::Duration timeout);

  // Legacy writer (see writer.h).
  absl::StatusOr<std::unique_ptr<Writer>> NewWriter(
      const WriterOptions& options);

  absl::StatusOr<std::unique_ptr<Sampler>> NewSampler(
      const std::string& table, const SamplerOptions& options);

  // A stream driven from the calling thread (see sample_stream.h).
  std::unique_ptr<SampleStream> NewSampleStream(const std::string& table);

 private:
  const std::string server_address_;
  std::shared_ptr<ReverbService::StubInterface> stub_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_H_
