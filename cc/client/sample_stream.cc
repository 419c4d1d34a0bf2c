#include "cc/client/sample_stream.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cc/client/deadline_watchdog.h"
#include "cc/support/status_macros.h"
#include "cc/wire/chunk_rows.h"
#include "cc/wire/grpc_status.h"
#include "cc/wire/sample_response.h"
#include "google/protobuf/arena.h"

namespace deepmind::reverb {
namespace {

// A sample response and the arena it is parsed on. Blocks start at 4 KiB
// (a response of small samples fits in a few) and grow to 64 KiB.
struct ArenaResponse {
  static google::protobuf::ArenaOptions Options() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 4 << 10;
    options.max_block_size = 64 << 10;
    return options;
  }

  google::protobuf::Arena arena{Options()};
  SampleStreamResponse* const response =
      google::protobuf::Arena::CreateMessage<SampleStreamResponse>(&arena);
  // The contents of its chunks that lie apart: in its receive buffers, or
  // in shared-memory segments (mapped until the response goes).
  HeldChunkContents taken;
};

}  // namespace

SampleStream::SampleStream(std::shared_ptr<const Connection> connection,
                           std::string table)
    : connection_(std::move(connection)), table_(std::move(table)) {
  context_.set_wait_for_ready(false);
  stream_ = connection_->OpenSampleStream(&context_);
}

SampleStream::~SampleStream() {
  if (!finished_) {
    context_.TryCancel();
    stream_->Finish().IgnoreError();
  }
}

absl::Status SampleStream::Fail(absl::Status status) {
  if (!finished_) {
    // The server has ended the call, or we cancel it: Finish() tells why.
    if (!status.ok()) context_.TryCancel();
    absl::Status final_status = FromGrpcStatus(stream_->Finish());
    finished_ = true;
    if (status.ok()) status = final_status;
  }
  if (status.ok()) {
    status = absl::UnavailableError("The server ended the sample stream.");
  }
  if (status_.ok()) status_ = status;
  return status_;
}

absl::Status SampleStream::Request(int64_t n, absl::Duration timeout) {
  if (!status_.ok()) return status_;
  SampleStreamRequest request;
  request.set_table(table_);
  request.set_num_samples(n);
  request.set_trimmed_chunks(true);
  if (!shared_memory_asked_) {
    shared_memory_ = connection_->SharedMemory(kSharedMemoryTimeout);
    shared_memory_asked_ = true;
  }
  if (shared_memory_ != nullptr) {
    request.set_shared_memory_secret(shared_memory_->secret());
  }
  const bool bounded =
      timeout != absl::InfiniteDuration() && timeout > absl::ZeroDuration();
  request.mutable_rate_limiter_timeout()->set_milliseconds(
      timeout == absl::InfiniteDuration()
          ? -1
          : std::max<int64_t>(bounded ? 1 : 0,
                              absl::ToInt64Milliseconds(timeout)));
  read_timeout_ = bounded ? timeout + kServerGrace : absl::InfiniteDuration();
  if (!stream_->Write(request)) return Fail(absl::OkStatus());
  outstanding_ += n;
  return absl::OkStatus();
}

absl::StatusOr<Sample> SampleStream::Read() {
  REVERB_ASSIGN_OR_RETURN(PackedSample packed, ReadPacked());
  auto sample = UnpackSample(std::move(packed));
  if (!sample.ok()) return Fail(sample.status());
  return sample;
}

absl::Status SampleStream::DecodeSharedResponse(
    absl::FunctionRef<void(const ChunkData*, std::vector<absl::Cord>)> hold) {
  if (shared_memory_ == nullptr || response_->entries_size() > 0) {
    return absl::InvalidArgumentError(
        "The server sent a shared-memory response the stream did not ask "
        "for, or with entries besides.");
  }
  const SharedMemoryResponse shared = response_->shared_response();
  response_->clear_shared_response();
  REVERB_ASSIGN_OR_RETURN(const absl::Cord bytes,
                          shared_memory_->TakeResponse(shared));
  REVERB_RETURN_IF_ERROR(DecodeSampleResponse(bytes, response_, hold));
  if (response_->has_shared_response()) {
    return absl::InvalidArgumentError(
        "A shared-memory response names another one.");
  }
  return absl::OkStatus();
}

absl::StatusOr<PackedSample> SampleStream::ReadPacked(
    absl::FunctionRef<void(SampleInfo*)> edit_info) {
  if (!status_.ok()) return status_;
  PackedSample packed;
  SampleInfo* info = nullptr;
  while (true) {
    if (response_ == nullptr || next_entry_ == response_->entries_size()) {
      auto holder = std::make_shared<ArenaResponse>();
      response_owner_ = holder;
      response_ = holder->response;
      taken_ = &holder->taken;
      next_entry_ = 0;
      if (!ReadResponse()) {
        return Fail(read_timed_out_ ? ReadTimedOut() : absl::OkStatus());
      }
      auto hold = [this](const ChunkData* chunk,
                         std::vector<absl::Cord> contents) {
        taken_->Hold(chunk, std::move(contents));
      };
      absl::Status decoded =
          DecodeSampleResponse(response_bytes_, response_, hold);
      response_bytes_.Clear();
      if (decoded.ok() && response_->has_shared_response()) {
        decoded = DecodeSharedResponse(hold);
      }
      if (!decoded.ok()) return Fail(decoded);
      if (shared_memory_ != nullptr) {
        if (absl::Status taken = shared_memory_->TakeChunks(response_, taken_);
            !taken.ok()) {
          return Fail(taken);
        }
      }
      continue;
    }
    auto& entry = *response_->mutable_entries(next_entry_++);
    if (entry.has_info()) {
      info = entry.mutable_info();
      edit_info(info);
      packed.info =
          std::shared_ptr<const SampleInfo>(response_owner_, &entry.info());
    }
    for (const ChunkData& chunk : entry.data()) {
      packed.chunks.push_back(&chunk);
      if (auto it = taken_->contents.find(&chunk);
          it != taken_->contents.end()) {
        packed.contents.resize(packed.chunks.size() - 1, nullptr);
        packed.contents.push_back(&it->second);
      }
    }
    if (packed.owners.empty() || packed.owners.back() != response_owner_) {
      packed.owners.push_back(response_owner_);
    }
    if (!entry.end_of_sequence()) continue;
    if (info != nullptr) {
      UntrimSlices(packed.chunks,
                   info->mutable_item()->mutable_flat_trajectory());
    }
    --outstanding_;
    return packed;
  }
}

absl::Status SampleStream::ReadTimedOut() const {
  return absl::DeadlineExceededError(absl::StrCat(
      "No sample arrived within ", absl::FormatDuration(read_timeout_),
      " (the request's timeout and ", absl::FormatDuration(kServerGrace),
      " for the server to answer it)."));
}

bool SampleStream::ReadResponse() {
  if (read_timeout_ == absl::InfiniteDuration()) {
    return stream_->Read(&response_bytes_);
  }
  DeadlineWatchdog& watchdog = DeadlineWatchdog::Get();
  const int64_t id = watchdog.Arm(&context_, absl::Now() + read_timeout_);
  const bool ok = stream_->Read(&response_bytes_);
  if (watchdog.Disarm(id)) read_timed_out_ = true;
  return ok;
}

absl::Status SampleStream::Close() {
  if (finished_) return status_;
  if (outstanding_ > 0 || !status_.ok()) {
    return Fail(absl::CancelledError("The sample stream was closed early."));
  }
  stream_->WritesDone();
  status_ = FromGrpcStatus(stream_->Finish());
  finished_ = true;
  return status_;
}

}  // namespace deepmind::reverb
