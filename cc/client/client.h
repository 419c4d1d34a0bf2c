// Client: a connection to a Reverb server, or to several (shards, see
// shards.h and docs/sharding.md), and the calls they serve.
//
// Over one address everything goes to that server, as dm-reverb's client.
// Over several: MutatePriorities sends the update or delete of a key that a
// sampler of this client drew recently to the shard it came from
// (sampled_keys.h), and of any other key to every shard (a shard ignores
// keys it does not hold); a shard with no key to change is not called,
// unless no shard has (then every shard is, and answers for the table).
// Reset and Checkpoint go to every shard, ServerInfo merges the shards'
// tables (ShardInfo keeps them apart), writers write to one shard at a time
// and samplers draw from all of them (sampler.h, trajectory_writer.h); a
// shard in this process is used as a single server there would be, directly
// (connection.h's in-process path).
// A shard that is down (shards.h) holds up none of these calls, even
// without a timeout: one known to be down is not called, and a call to one
// that goes down meanwhile is cancelled (ServerInfo, ShardInfo: dropped
// within kServerInfoSlice). ServerInfo leaves it out,
// ShardInfo reports it UNAVAILABLE, MutatePriorities skips it (the items
// there cannot change while it is down), Reset and Checkpoint act on the
// others and return UNAVAILABLE.
//
// Unary calls with a timeout wait for the server to become ready until then
// (Checkpoint fails fast instead: UNAVAILABLE if the server cannot be
// reached) and return DEADLINE_EXCEEDED once it has passed. Without one (an
// infinite timeout), over one server, they fail with UNAVAILABLE if no
// connection is made within kConnectTimeout, and otherwise wait for the
// answer, however long it takes a live server; one that stops answering is
// found by the channel's keepalive (connection.h). Over several, a shard
// that cannot be reached is found down by the refresher (see above).
// ServerInfo and ShardInfo without a timeout give every server
// kConnectTimeout to answer (UNAVAILABLE if it has not). They return the
// server's status (docs/wire-protocol.md, "Status codes"). A failed TLS
// handshake (channel_security.h) fails any of them at once with
// UNAUTHENTICATED, timeout or not; the token the server refuses does too,
// as the server's status. Writers and samplers
// made here share the channel and may outlive the Client.
//
// Thread-safe: the calls keep no state besides the shared channel.
#ifndef REVERB_CC_CLIENT_CLIENT_H_
#define REVERB_CC_CLIENT_CLIENT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/client/connection.h"
#include "cc/client/legacy_writer.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/client/sampler.h"
#include "cc/client/shards.h"
#include "cc/client/trajectory_writer.h"
#include "cc/support/export.h"
#include "cc/support/keepalive.h"

namespace deepmind::reverb {

class REVERB_EXPORT Client {
 public:
  explicit Client(const std::string& server_address);
  // INVALID_ARGUMENT as Shards::Create. `keepalive` and `security`: the
  // channels' (shards.h).
  static absl::StatusOr<std::unique_ptr<Client>> Create(
      std::vector<std::string> server_addresses,
      absl::Duration keepalive = KeepaliveFromEnvironment(),
      std::optional<ChannelSecurity> security = std::nullopt);

  // The first shard's address (the only one's, over one).
  const std::string& server_address() const { return shards_->address(0); }
  const std::shared_ptr<Shards>& shards() const { return shards_; }

  // Deletes `deletes`, then sets the priority of `keys[i]` to
  // `priorities[i]` (INVALID_ARGUMENT, sending nothing, if the spans differ
  // in length). One MutatePrioritiesRequest per shard, as dm-reverb's. A
  // server in this process (Connection::LocalTable, once the channel is
  // connected) has its table changed directly.
  absl::Status MutatePriorities(const std::string& table,
                                absl::Span<const uint64_t> keys,
                                absl::Span<const double> priorities,
                                absl::Span<const uint64_t> deletes,
                                absl::Duration timeout);
  // The same with (key, priority) pairs.
  absl::Status MutatePriorities(const std::string& table,
                                absl::Span<const KeyWithPriority> updates,
                                absl::Span<const uint64_t> deletes,
                                absl::Duration timeout);

  absl::Status Reset(const std::string& table, absl::Duration timeout);

  // Over several shards: the tables of the shards that answered within
  // `timeout`, merged by name (sizes, counts and priority mass summed, the
  // settings of the first); the first error if none answered. Shards down
  // are left out (see above), unless all are known to be down: then all
  // are asked.
  absl::StatusOr<ServerInfoResponse> ServerInfo(absl::Duration timeout);

  // The ServerInfo of each shard, or its error, asked in parallel (a shard
  // down: UNAVAILABLE, see above).
  std::vector<absl::StatusOr<ServerInfoResponse>> ShardInfo(
      absl::Duration timeout);

  // The directory each shard wrote, in the order of the addresses.
  absl::StatusOr<std::vector<std::string>> Checkpoint(absl::Duration timeout);

  // Legacy writer (see legacy_writer.h).
  absl::StatusOr<std::unique_ptr<Writer>> NewWriter(
      const WriterOptions& options);

  // Items of any cells of recent steps (see trajectory_writer.h).
  absl::StatusOr<std::unique_ptr<TrajectoryWriter>> NewTrajectoryWriter(
      std::shared_ptr<ChunkerOptions> options);

  // Over several shards its streams are ShardedSampleStreams.
  absl::StatusOr<std::unique_ptr<Sampler>> NewSampler(
      const std::string& table, const SamplerOptions& options);

  // A stream driven from the calling thread: over one server a
  // SampleStream (sample_stream.h), or a LocalSampleStream
  // (local_sample_stream.h) if the server is in this process, once the
  // channel is connected (waited for up to `timeout` or kConnectTimeout,
  // whichever is shorter: DEADLINE_EXCEEDED if `timeout` ran out, else
  // UNAVAILABLE); over several a ShardedSampleStream
  // (sharded_sample_stream.h), at once (its reads fail
  // with UNAVAILABLE if no shard can be reached).
  absl::StatusOr<std::unique_ptr<SampleStreamInterface>> NewSampleStream(
      const std::string& table, absl::Duration timeout);

 private:
  explicit Client(std::shared_ptr<Shards> shards);

  // How long a ServerInfo call to several shards waits before it looks
  // again at which are down (a shard found down meanwhile is dropped).
  static constexpr absl::Duration kServerInfoSlice = Shards::kRefreshTimeout;

  // ShardInfo (ServerInfo with `skip_down` as below): without a timeout,
  // kConnectTimeout, and a shard that has not answered by then is
  // UNAVAILABLE.
  std::vector<absl::StatusOr<ServerInfoResponse>> AskInfo(
      absl::Duration timeout, bool skip_down);

  // ShardInfo over several shards, in slices of kServerInfoSlice; with
  // `skip_down` false, every shard is asked, down or not, for all of
  // `timeout`.
  std::vector<absl::StatusOr<ServerInfoResponse>> AskShards(
      absl::Duration timeout, bool skip_down);

  // UNAVAILABLE: `shard` is down (UNAUTHENTICATED instead if its TLS
  // handshake failed: Connection::Explain).
  absl::Status ShardDown(int shard) const;

  // Runs `call` (a status of the shard's index, its stub and a context) on
  // every shard, in turn, the context set up for `timeout` and `wait_for_ready`
  // (over one server, without a timeout: see above); the first error. Over
  // several shards, a shard known to be down is not called, and a call to one
  // that goes down meanwhile is cancelled: that shard's status is UNAVAILABLE
  // if `down_is_error`, else OK.
  template <typename Call>
  absl::Status OnEveryShard(Call call, absl::Duration timeout,
                            bool wait_for_ready, bool down_is_error);

  const std::shared_ptr<Shards> shards_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_CLIENT_H_
