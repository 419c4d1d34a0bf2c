#include "cc/service/initialize_connection_reactor.h"

#include <unistd.h>

#include <cstdint>

#include "absl/strings/match.h"
#include "cc/service/service.h"
#include "cc/wire/grpc_status.h"

namespace deepmind::reverb {

InitializeConnectionReactor::InitializeConnectionReactor(
    const ReverbServiceImpl* service, const std::string& peer)
    : service_(service) {
  if (!IsLocalhostOrInProcess(peer)) {
    Finish(grpc::Status::OK);
    return;
  }
  StartRead(&request_);
}

bool InitializeConnectionReactor::IsLocalhostOrInProcess(
    const std::string& peer) {
  return peer.empty() || peer == "unknown" ||
         absl::StrContains(peer, ":127.0.0.1:") ||
         absl::StrContains(peer, "::1");
}

void InitializeConnectionReactor::OnReadDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status::OK);
    return;
  }
  if (handle_ != nullptr) {  // The second request.
    Finish(request_.ownership_transferred()
               ? grpc::Status::OK
               : grpc::Status(grpc::StatusCode::INTERNAL,
                              "Received unexpected request"));
    return;
  }
  if (request_.pid() != getpid() ||
      request_.libreverb_identity() != LibreverbIdentity()) {
    response_.set_address(0);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    return;
  }
  std::shared_ptr<Table> table;
  if (!request_.table_name().empty()) {
    auto found = service_->FindTable(request_.table_name());
    if (!found.ok()) {
      Finish(ToGrpcStatus(found.status()));
      return;
    }
    table = *std::move(found);
  }
  handle_ = std::make_unique<LocalTableHandle>(LocalTableHandle{
      LibreverbIdentity(), std::move(table), service_->tables()});
  response_.set_address(
      static_cast<int64_t>(reinterpret_cast<intptr_t>(handle_.get())));
  StartWrite(&response_);
}

void InitializeConnectionReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status::OK);
    return;
  }
  StartRead(&request_);
}

void InitializeConnectionReactor::OnDone() { delete this; }

}  // namespace deepmind::reverb
