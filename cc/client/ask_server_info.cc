#include "cc/client/ask_server_info.h"

#include <utility>

#include "cc/wire/grpc_status.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/support/async_unary_call.h"

namespace deepmind::reverb {

std::vector<absl::StatusOr<ServerInfoResponse>> AskServerInfo(
    absl::Span<const std::shared_ptr<const Connection>> connections,
    absl::FunctionRef<void(int, grpc::ClientContext*)> prepare) {
  struct Call {
    grpc::ClientContext context;
    ServerInfoResponse response;
    grpc::Status status;
    std::unique_ptr<
        grpc::ClientAsyncResponseReaderInterface<ServerInfoResponse>>
        reader;
  };
  // Declared first: destroyed after the calls, once it is drained.
  grpc::CompletionQueue queue;
  std::vector<Call> calls(connections.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& call = calls[i];
    prepare(static_cast<int>(i), &call.context);
    call.reader = connections[i]->stub()->AsyncServerInfo(
        &call.context, ServerInfoRequest::default_instance(), &queue);
    call.reader->Finish(&call.response, &call.status, &call);
  }
  // Each call's Finish comes back exactly once.
  void* tag;
  bool ok;
  for (size_t ended = 0; ended < calls.size() && queue.Next(&tag, &ok);
       ++ended) {
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  std::vector<absl::StatusOr<ServerInfoResponse>> infos;
  infos.reserve(calls.size());
  for (Call& call : calls) {
    if (call.status.ok()) {
      infos.push_back(std::move(call.response));
    } else {
      infos.push_back(FromGrpcStatus(call.status));
    }
  }
  return infos;
}

}  // namespace deepmind::reverb
