#include "cc/client/local_table.h"

#include <unistd.h>

#include <cstdint>

#include "cc/core/local_table.h"
#include "cc/wire/grpc_status.h"
#include "grpcpp/client_context.h"

namespace deepmind::reverb {

absl::StatusOr<std::shared_ptr<Table>> AskLocalTable(
    ReverbService::StubInterface* stub, const std::string& table,
    absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  auto stream = stub->InitializeConnection(&context);
  InitializeConnectionRequest request;
  request.set_pid(getpid());
  request.set_table_name(table);
  request.set_libreverb_identity(LibreverbIdentity());
  InitializeConnectionResponse response;
  if (!stream->Write(request) || !stream->Read(&response)) {
    stream->WritesDone();
    absl::Status status = FromGrpcStatus(stream->Finish());
    if (!status.ok()) return status;
    return nullptr;  // Not served: a peer that is not local.
  }
  std::shared_ptr<Table> local;
  if (response.address() != 0) {
    const auto* handle = reinterpret_cast<const LocalTableHandle*>(
        static_cast<intptr_t>(response.address()));
    if (handle->identity == LibreverbIdentity()) local = handle->table;
  }
  if (local != nullptr) {
    InitializeConnectionRequest transferred;
    transferred.set_ownership_transferred(true);
    stream->Write(transferred);
  }
  stream->WritesDone();
  // The server frees its handle when the call ends, whatever it says.
  if (local == nullptr) context.TryCancel();
  stream->Finish().IgnoreError();
  return local;
}

}  // namespace deepmind::reverb
