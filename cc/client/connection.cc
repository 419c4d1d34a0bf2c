#include "cc/client/connection.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace deepmind::reverb {
namespace {

constexpr int kMaxReconnectBackoffMs = 30 * 1000;

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  args.SetLoadBalancingPolicyName("round_robin");
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

}  // namespace

Connection::Connection(const std::string& server_address)
    : server_address_(server_address),
      channel_(MakeChannel(server_address)),
      stub_(ReverbService::NewStub(channel_)),
      insert_stream_("/deepmind.reverb.ReverbService/InsertStream",
                     grpc::internal::RpcMethod::BIDI_STREAMING, channel_) {}

std::unique_ptr<
    grpc::ClientReaderWriter<grpc::ByteBuffer, InsertStreamResponse>>
Connection::OpenInsertStream(grpc::ClientContext* context) const {
  return std::unique_ptr<
      grpc::ClientReaderWriter<grpc::ByteBuffer, InsertStreamResponse>>(
      grpc::internal::ClientReaderWriterFactory<
          grpc::ByteBuffer, InsertStreamResponse>::Create(channel_.get(),
                                                          insert_stream_,
                                                          context));
}

absl::Status Connection::WaitForConnection(absl::Duration timeout) const {
  if (channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
    return absl::OkStatus();
  }
  if (channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      "Could not connect to the Reverb server at ", server_address_, " within ",
      absl::FormatDuration(timeout), "."));
}

void Connection::ResetConnectBackoff() const {
  grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
}

}  // namespace deepmind::reverb
