#include "cc/client/insert_stream.h"

#include <thread>
#include <utility>
#include <vector>

#include "cc/client/built_chunk.h"
#include "cc/client/local_insert_stream.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"
#include "cc/wire/grpc_status.h"
#include "cc/wire/insert_request.h"
#include "grpcpp/client_context.h"

namespace deepmind::reverb {
namespace {

// The InsertStream of a gRPC call.
class GrpcInsertStream final : public InsertStream {
 public:
  // `shared_memory`: the server's session, or null.
  GrpcInsertStream(std::shared_ptr<const Connection> connection,
                   std::shared_ptr<const SharedMemoryClient> shared_memory,
                   ConfirmedCallback on_confirmed, EndedCallback on_ended);
  ~GrpcInsertStream() override;

  bool Write(const InsertStreamRequest& request,
             absl::Span<const std::shared_ptr<const ChunkData>> chunks,
             Then then) override;
  void Cancel() override { context_.TryCancel(); }
  absl::Status Close() override;
  absl::Status Finish() override;

 private:
  // Reads responses until the call ends (the reader thread).
  void ReadConfirmations();
  // Joins the reader and returns the call's status as gRPC reports it.
  absl::Status FinishCall();

  const std::shared_ptr<const Connection> connection_;
  const ConfirmedCallback on_confirmed_;
  const EndedCallback on_ended_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<grpc::ByteBuffer, InsertStreamResponse>>
      stream_;
  std::thread reader_;
  bool finished_ = false;  // FinishCall() has run.
  // Null without shared memory. Declared last: its segments go after the
  // call has ended.
  std::unique_ptr<SharedMemoryClient::Writer> shared_memory_;
};

GrpcInsertStream::GrpcInsertStream(
    std::shared_ptr<const Connection> connection,
    std::shared_ptr<const SharedMemoryClient> shared_memory,
    ConfirmedCallback on_confirmed, EndedCallback on_ended)
    : connection_(std::move(connection)),
      on_confirmed_(std::move(on_confirmed)),
      on_ended_(std::move(on_ended)) {
  if (shared_memory != nullptr) {
    shared_memory_ =
        std::make_unique<SharedMemoryClient::Writer>(std::move(shared_memory));
  }
  context_.set_wait_for_ready(false);
  stream_ = connection_->OpenInsertStream(&context_);
  reader_ = std::thread([this] { ReadConfirmations(); });
  SetThreadName(reader_, "reverb-confirm");
}

GrpcInsertStream::~GrpcInsertStream() {
  if (!finished_) {
    Cancel();
    FinishCall().IgnoreError();
  }
}

bool GrpcInsertStream::Write(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks, Then then) {
  std::vector<std::shared_ptr<const ChunkData>> as_protos;
  std::vector<absl::Cord> as_bytes;  // Of built chunks (built_chunk.h).
  std::vector<SharedMemoryChunk> as_segments;
  for (const auto& chunk : chunks) {
    const BuiltChunk* built = FindBuiltChunk(chunk);
    if (shared_memory_ != nullptr) {
      const size_t size = ChunkWireSize(chunk);
      SharedMemoryChunk segment;
      if ((built != nullptr || shared_memory_->Wants(size)) &&
          shared_memory_->Write(chunk, size, &segment)) {
        as_segments.push_back(std::move(segment));
        continue;
      }
    }
    if (built != nullptr) {
      as_bytes.push_back(built->bytes);
    } else {
      as_protos.push_back(chunk);
    }
  }
  const grpc::ByteBuffer bytes =
      EncodeInsertRequest(request, as_protos, as_segments, as_bytes);
  const bool ready_first = then == Then::kMoreChunksFollow;
  if (shared_memory_ != nullptr && ready_first) {
    shared_memory_->MakeNextReady();
  }
  const bool written =
      stream_->Write(bytes, grpc::WriteOptions().set_no_compression());
  if (shared_memory_ != nullptr && !ready_first) {
    shared_memory_->MakeNextReady();
  }
  return written;
}

absl::Status GrpcInsertStream::Close() {
  stream_->WritesDone();
  return FinishCall();
}

absl::Status GrpcInsertStream::Finish() {
  absl::Status status = FinishCall();
  return status.ok()
             ? absl::UnavailableError("The server ended the insert stream.")
             : status;
}

void GrpcInsertStream::ReadConfirmations() {
  InsertStreamResponse response;
  while (stream_->Read(&response)) {
    on_confirmed_(
        absl::MakeConstSpan(response.keys().data(), response.keys().size()));
  }
  on_ended_();
}

absl::Status GrpcInsertStream::FinishCall() {
  reader_.join();
  finished_ = true;
  return FromGrpcStatus(stream_->Finish());
}

}  // namespace

absl::StatusOr<std::unique_ptr<InsertStream>> InsertStream::Open(
    std::shared_ptr<const Connection> connection,
    absl::Duration connect_timeout, ConfirmedCallback on_confirmed,
    EndedCallback on_ended) {
  REVERB_RETURN_IF_ERROR(connection->WaitForConnection(connect_timeout));
  if (auto tables = connection->LocalTables(connect_timeout); !tables.empty()) {
    return std::unique_ptr<InsertStream>(new LocalInsertStream(
        std::move(tables), std::move(on_confirmed), std::move(on_ended)));
  }
  auto shared_memory = connection->SharedMemory(connect_timeout, true);
  return std::unique_ptr<InsertStream>(
      new GrpcInsertStream(std::move(connection), std::move(shared_memory),
                           std::move(on_confirmed), std::move(on_ended)));
}

}  // namespace deepmind::reverb
