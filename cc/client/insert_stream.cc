#include "cc/client/insert_stream.h"

#include <utility>

#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"
#include "cc/wire/grpc_status.h"
#include "cc/wire/insert_request.h"

namespace deepmind::reverb {

absl::StatusOr<std::unique_ptr<InsertStream>> InsertStream::Open(
    std::shared_ptr<const Connection> connection,
    absl::Duration connect_timeout, ConfirmedCallback on_confirmed,
    EndedCallback on_ended) {
  REVERB_RETURN_IF_ERROR(connection->WaitForConnection(connect_timeout));
  return std::unique_ptr<InsertStream>(new InsertStream(
      std::move(connection), std::move(on_confirmed), std::move(on_ended)));
}

InsertStream::InsertStream(std::shared_ptr<const Connection> connection,
                           ConfirmedCallback on_confirmed,
                           EndedCallback on_ended)
    : connection_(std::move(connection)),
      on_confirmed_(std::move(on_confirmed)),
      on_ended_(std::move(on_ended)) {
  context_.set_wait_for_ready(false);
  stream_ = connection_->OpenInsertStream(&context_);
  reader_ = std::thread([this] { ReadConfirmations(); });
  SetThreadName(reader_, "reverb-confirm");
}

InsertStream::~InsertStream() {
  if (!finished_) {
    Cancel();
    FinishCall().IgnoreError();
  }
}

bool InsertStream::Write(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks) {
  return stream_->Write(EncodeInsertRequest(request, chunks),
                        grpc::WriteOptions().set_no_compression());
}

absl::Status InsertStream::Close() {
  stream_->WritesDone();
  return FinishCall();
}

absl::Status InsertStream::Finish() {
  absl::Status status = FinishCall();
  return status.ok()
             ? absl::UnavailableError("The server ended the insert stream.")
             : status;
}

void InsertStream::ReadConfirmations() {
  InsertStreamResponse response;
  while (stream_->Read(&response)) {
    on_confirmed_(
        absl::MakeConstSpan(response.keys().data(), response.keys().size()));
  }
  on_ended_();
}

absl::Status InsertStream::FinishCall() {
  reader_.join();
  finished_ = true;
  return FromGrpcStatus(stream_->Finish());
}

}  // namespace deepmind::reverb
