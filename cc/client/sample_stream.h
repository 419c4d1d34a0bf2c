// SampleStream: one SampleStream call to one server, driven from the
// calling thread (the contract of each method: sample_stream_interface.h).
//
// Request(n) writes a request for n more samples; Read() gathers each
// sample's entries (which may span responses) and unpacks its chunks. On
// the server's host, large chunks, and large responses, may come as
// shared-memory segments (Connection::SharedMemory), read when their
// response arrives. The
// Sampler runs one per worker thread; Client.sample keeps idle ones per
// table to save the call setup. A ShardedSampleStream runs one per shard.
//
// Not thread-safe, except Cancel(), which may be called from any thread.
#ifndef REVERB_CC_CLIENT_SAMPLE_STREAM_H_
#define REVERB_CC_CLIENT_SAMPLE_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/connection.h"
#include "cc/client/sample.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/client/shared_memory_client.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT SampleStream final : public SampleStreamInterface {
 public:
  SampleStream(std::shared_ptr<const Connection> connection, std::string table);
  // Cancels the call unless Close() has ended it.
  ~SampleStream() override;

  SampleStream(const SampleStream&) = delete;
  SampleStream& operator=(const SampleStream&) = delete;

  // The server answers DEADLINE_EXCEEDED if its rate limiter holds a
  // request longer than `rate_limiter_timeout`; the timeout goes out in
  // whole milliseconds (at least 1 if positive), infinite as -1. With a
  // positive finite timeout, the reads that follow hold it on the client
  // too: a read that waits more than the timeout plus kServerGrace for a
  // response (the server froze, or the network was cut) cancels the call
  // and returns DEADLINE_EXCEEDED.
  absl::Status Request(int64_t n, absl::Duration rate_limiter_timeout) override;

  // How long past a request's timeout the server's own answer is waited
  // for.
  static constexpr absl::Duration kServerGrace = absl::Seconds(1);

  // A sample that cannot be unpacked cancels the call.
  absl::StatusOr<Sample> Read() override;
  using SampleStreamInterface::ReadPacked;
  // The info edited is in the response it arrived in.
  absl::StatusOr<PackedSample> ReadPacked(
      absl::FunctionRef<void(SampleInfo*)> edit_info) override;

  bool has_buffered_entries() const override {
    return response_ != nullptr && next_entry_ < response_->entries_size();
  }

  int64_t outstanding() const override { return outstanding_; }
  bool ok() const override { return status_.ok(); }

  // Ends the call (CANCELLED if samples were outstanding).
  absl::Status Close() override;

  void Cancel() override { context_.TryCancel(); }

 private:
  // Records the call's final status (the first error wins).
  absl::Status Fail(absl::Status status);
  // Reads the next response into response_bytes_, within read_timeout_;
  // false once the call has ended (read_timed_out_ if it timed out).
  bool ReadResponse();
  // The status of a read that timed out.
  absl::Status ReadTimedOut() const;
  // Decodes the response *response_ names (shared_response: its entries
  // are in a segment, shared_memory_client.h) into *response_, with the
  // contents that lie apart to `hold`.
  absl::Status DecodeSharedResponse(
      absl::FunctionRef<void(const ChunkData*, std::vector<absl::Cord>)> hold);

  const std::shared_ptr<const Connection> connection_;
  const std::string table_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriterInterface<SampleStreamRequest, grpc::ByteBuffer>>
      stream_;
  grpc::ByteBuffer response_bytes_;  // The last response read, as received.
  // The response being read, parsed on an arena of its own (one block
  // allocation instead of one per message and string); samples point into
  // it and share its ownership, so each response gets a fresh one.
  std::shared_ptr<const void> response_owner_;
  SampleStreamResponse* response_ = nullptr;
  // The contents of *response_'s chunks that lie apart: large ones, in the
  // response's receive buffers (DecodeSampleResponse), and shared-memory
  // ones.
  HeldChunkContents* taken_ = nullptr;
  int next_entry_ = 0;  // Next unread entry of *response_.
  int64_t outstanding_ = 0;
  // The longest a read waits for a response (see Request).
  absl::Duration read_timeout_ = absl::InfiniteDuration();
  bool read_timed_out_ = false;
  absl::Status status_;
  bool finished_ = false;  // Finish() has been called.
  // The server's shared-memory session, asked before the first request (at
  // most kSharedMemoryTimeout): its chunks may then come as segments.
  static constexpr absl::Duration kSharedMemoryTimeout = absl::Seconds(5);
  bool shared_memory_asked_ = false;
  std::shared_ptr<const SharedMemoryClient> shared_memory_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SAMPLE_STREAM_H_
