#include "cc/client/local_table.h"

#include <unistd.h>

#include <cstdint>

#include "cc/core/local_table.h"
#include "cc/wire/grpc_status.h"
#include "grpcpp/client_context.h"

namespace deepmind::reverb {

absl::StatusOr<std::vector<std::shared_ptr<Table>>> AskLocalTables(
    ReverbService::StubInterface* stub, absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  auto stream = stub->InitializeConnection(&context);
  InitializeConnectionRequest request;
  request.set_pid(getpid());
  request.set_libreverb_identity(LibreverbIdentity());
  InitializeConnectionResponse response;
  if (!stream->Write(request) || !stream->Read(&response)) {
    stream->WritesDone();
    absl::Status status = FromGrpcStatus(stream->Finish());
    if (!status.ok()) return status;
    return std::vector<std::shared_ptr<Table>>();  // A peer not local.
  }
  std::vector<std::shared_ptr<Table>> local;
  bool ours = false;
  if (response.address() != 0) {
    const auto* handle = reinterpret_cast<const LocalTableHandle*>(
        static_cast<intptr_t>(response.address()));
    ours = handle->identity == LibreverbIdentity();
    if (ours) local = handle->tables;
  }
  if (ours) {
    InitializeConnectionRequest transferred;
    transferred.set_ownership_transferred(true);
    stream->Write(transferred);
  }
  stream->WritesDone();
  // The server frees its handle when the call ends, whatever it says.
  if (!ours) context.TryCancel();
  stream->Finish().IgnoreError();
  return local;
}

}  // namespace deepmind::reverb
