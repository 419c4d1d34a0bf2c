// Connection: a gRPC channel to a Reverb server and the service stub over
// it, shared by a Client and the writers, samplers and streams it makes.
//
// The channel is secured as its ChannelSecurity says (channel_security.h;
// plaintext without one), has unlimited message sizes, a 30 s reconnect
// backoff cap and the round_robin load-balancing policy (as dm-reverb), so
// an address that resolves to several servers spreads streams over them.
//
// It sends keepalive pings (cc/support/keepalive.h): once a server stops
// answering (a frozen process, a cut network), the calls and streams on the
// channel fail with UNAVAILABLE within about twice the keepalive interval,
// including calls that wait without a deadline. A call that waits on a live
// server's rate limiter goes on waiting (the server answers the pings).
//
// A server in this process hands its tables over (InitializeConnection,
// cc/client/local_table.h): LocalTables() and LocalTable() learn, lazily,
// whether writers and samplers can use the tables directly instead of
// streams. Setting the environment variable REVERB_IN_PROCESS=0 turns this
// off (every call goes through gRPC).
//
// A server on this host may offer shared memory for large chunks
// (SharedMemory(), shared_memory_client.h); REVERB_SHARED_MEMORY=0 turns
// that off.
#ifndef REVERB_CC_CLIENT_CONNECTION_H_
#define REVERB_CC_CLIENT_CONNECTION_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cc/client/channel_security.h"
#include "cc/client/shared_memory_client.h"
#include "cc/core/table.h"
#include "cc/support/export.h"
#include "cc/support/keepalive.h"
#include "cc/support/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "reverb/cc/reverb_service.grpc.pb.h"

namespace deepmind::reverb {

// How long a call without a timeout (and the writers, and Client.sample)
// waits for a connection before it fails with UNAVAILABLE.
inline constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

// Whether Connections made now may use the in-process path to a server in
// this process: REVERB_IN_PROCESS is not "0".
REVERB_EXPORT bool InProcessAllowed();

class REVERB_EXPORT Connection {
 public:
  // `keepalive`: the interval of the keepalive pings (infinite: none).
  // `security` is loaded (LoadChannelSecurity).
  explicit Connection(const std::string& server_address,
                      absl::Duration keepalive = KeepaliveFromEnvironment(),
                      ChannelSecurity security = {});

  const std::string& server_address() const { return server_address_; }
  ReverbService::StubInterface* stub() const { return stub_.get(); }

  // An InsertStream whose requests the caller serializes, as the writers do
  // with EncodeInsertRequest (insert_request.h), so that chunk tensors are
  // sent without a copy.
  std::unique_ptr<
      grpc::ClientReaderWriter<grpc::ByteBuffer, InsertStreamResponse>>
  OpenInsertStream(grpc::ClientContext* context) const;
  // A SampleStream whose responses the caller parses, as SampleStream does
  // with DecodeSampleResponse (sample_response.h), so that chunk tensors
  // are read where gRPC received them.
  std::unique_ptr<
      grpc::ClientReaderWriter<SampleStreamRequest, grpc::ByteBuffer>>
  OpenSampleStream(grpc::ClientContext* context) const;

  // Waits until the channel is connected, starting a connection (or cutting
  // a reconnect backoff short) if needed. Streams are opened without
  // wait-for-ready, so writers and samplers call this first: a server that
  // is restarting is waited for, one that is gone fails after `timeout`
  // with UNAVAILABLE. A TLS handshake that fails ends the wait at once with
  // UNAUTHENTICATED (see Explain).
  absl::Status WaitForConnection(absl::Duration timeout) const;

  // `status`, of a call that failed with UNAVAILABLE or DEADLINE_EXCEEDED,
  // or of a wait for the connection, as ExplainConnectFailure
  // (channel_security.h) puts it if the channel failed to connect: what the
  // client's retry loops never retry.
  absl::Status Explain(const absl::Status& status) const;

  // Lets the next call try to connect at once, instead of after the rest of
  // the reconnect backoff (up to 30 s after repeated failures).
  void ResetConnectBackoff() const;

  // The server's tables by name if it runs in this process (and this
  // libreverb): InitializeConnection handed them over. Empty otherwise.
  // Asked once, with the channel connected, waiting at most `timeout` (or
  // 5 s, whichever is shorter) for the answer: a server found elsewhere is
  // remembered as such, one in the process until one of its tables closes
  // (then the server is asked again); an error (a frozen server, the
  // timeout) is not remembered (empty). Thread-safe.
  using TablesByName = absl::flat_hash_map<std::string, std::shared_ptr<Table>>;
  TablesByName LocalTables(absl::Duration timeout = absl::InfiniteDuration())
      const ABSL_LOCKS_EXCLUDED(local_mu_);
  // `table` of LocalTables(); null if there is none. Thread-safe.
  std::shared_ptr<Table> LocalTable(
      const std::string& table,
      absl::Duration timeout = absl::InfiniteDuration()) const
      ABSL_LOCKS_EXCLUDED(local_mu_);

  // The server's shared-memory session for this process
  // (shared_memory_client.h), or null if it offers none. Asked at most
  // once, waiting at most `timeout` (or 5 s, whichever is shorter); with
  // `refresh`, asked again (a writer opening a stream does: the server may
  // have restarted, with a new session). An error (the server is
  // unreachable) is not remembered (null). Thread-safe.
  std::shared_ptr<const SharedMemoryClient> SharedMemory(
      absl::Duration timeout, bool refresh = false) const
      ABSL_LOCKS_EXCLUDED(shared_memory_mu_);

  // The session SharedMemory() last got, without asking the server; null
  // if none (or never asked). Thread-safe.
  std::shared_ptr<const SharedMemoryClient> KnownSharedMemory() const
      ABSL_LOCKS_EXCLUDED(shared_memory_mu_);

  // Whether the server's latest MutatePriorities answer said that it reads
  // update arrays (MutatePrioritiesRequest.update_keys: ours do, dm-reverb
  // does not); false until one has. Thread-safe.
  bool ReadsPriorityArrays() const { return reads_priority_arrays_; }
  void SetReadsPriorityArrays(bool reads) const {
    reads_priority_arrays_ = reads;
  }

 private:
  const std::string server_address_;
  const ChannelSecurity security_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ReverbService::StubInterface> stub_;
  const grpc::internal::RpcMethod insert_stream_;
  const grpc::internal::RpcMethod sample_stream_;
  const bool in_process_allowed_;

  // Asks the server for its tables unless known (see LocalTables).
  void LearnLocalTablesLocked(absl::Duration timeout) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(local_mu_);

  mutable Mutex local_mu_;
  // Whether the server has answered InitializeConnection, and its tables if
  // it is in this process (by name; none if elsewhere).
  mutable bool local_known_ ABSL_GUARDED_BY(local_mu_) = false;
  mutable absl::flat_hash_map<std::string, std::weak_ptr<Table>> local_tables_
      ABSL_GUARDED_BY(local_mu_);

  mutable Mutex shared_memory_mu_;
  mutable bool shared_memory_known_ ABSL_GUARDED_BY(shared_memory_mu_) = false;
  mutable std::shared_ptr<const SharedMemoryClient> shared_memory_
      ABSL_GUARDED_BY(shared_memory_mu_);

  mutable std::atomic<bool> reads_priority_arrays_{false};
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_CONNECTION_H_
