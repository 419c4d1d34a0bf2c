// Connection: a gRPC channel to a Reverb server and the service stub over
// it, shared by a Client and the writers, samplers and streams it makes.
//
// The channel is secured as its ChannelSecurity says (channel_security.h;
// plaintext without one), has unlimited message sizes, a 30 s reconnect
// backoff cap and the round_robin load-balancing policy (as dm-reverb), so
// an address that resolves to several servers spreads streams over them.
// It sends keepalive pings (cc/support/keepalive.h): once a server stops
// answering (a frozen process, a cut network), the calls and streams on the
// channel fail with UNAVAILABLE within about twice the keepalive interval,
// including calls that wait without a deadline. A call that waits on a live
// server's rate limiter goes on waiting (the server answers the pings).
#ifndef REVERB_CC_CLIENT_CONNECTION_H_
#define REVERB_CC_CLIENT_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cc/client/channel_security.h"
#include "cc/support/export.h"
#include "cc/support/keepalive.h"
#include "grpcpp/channel.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "reverb/cc/reverb_service.grpc.pb.h"

namespace deepmind::reverb {

// How long a call without a timeout (and the writers, and Client.sample)
// waits for a connection before it fails with UNAVAILABLE.
inline constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

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

 private:
  const std::string server_address_;
  const ChannelSecurity security_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ReverbService::StubInterface> stub_;
  const grpc::internal::RpcMethod insert_stream_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_CONNECTION_H_
