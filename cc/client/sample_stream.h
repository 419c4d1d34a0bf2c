// SampleStream: one SampleStream call, driven from the calling thread.
//
// Request(n) asks the server for n more samples; Read() returns them one by
// one, gathering each sample's entries (which may span responses) and
// unpacking its chunks. The stream can be reused for further requests once
// everything requested has been read. The Sampler runs one per worker
// thread; Client.sample keeps idle ones per table to save the call setup.
//
// Not thread-safe, except Cancel(), which may be called from any thread.
#ifndef REVERB_CC_CLIENT_SAMPLE_STREAM_H_
#define REVERB_CC_CLIENT_SAMPLE_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/connection.h"
#include "cc/client/sample.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT SampleStream {
 public:
  SampleStream(std::shared_ptr<const Connection> connection, std::string table);
  // Cancels the call unless Close() has ended it.
  ~SampleStream();

  SampleStream(const SampleStream&) = delete;
  SampleStream& operator=(const SampleStream&) = delete;

  // Asks for `n` (>= 1) more samples. The server answers DEADLINE_EXCEEDED
  // if its rate limiter holds a request longer than `rate_limiter_timeout`
  // (infinite: never). The timeout goes out in whole milliseconds, infinite
  // as -1; one under 1 ms becomes 0, which the server also takes as no
  // timeout. Returns the stream's final status if it has ended.
  absl::Status Request(int64_t n, absl::Duration rate_limiter_timeout);

  // The next requested sample. Once the stream has ended: its final status
  // (UNAVAILABLE if the server ended it without an error). A sample that
  // cannot be unpacked is returned as an error and cancels the stream.
  absl::StatusOr<Sample> Read();
  // As Read(), but leaves the sample packed (for the caller to unpack,
  // perhaps on another thread).
  absl::StatusOr<PackedSample> ReadPacked();

  // True if the next Read() can start from a response already received
  // (it may still have to wait if the sample continues in the next one).
  bool has_buffered_entries() const {
    return response_ != nullptr && next_entry_ < response_->entries_size();
  }

  // Samples requested and not yet read.
  int64_t outstanding() const { return outstanding_; }
  // False once the stream has ended or failed.
  bool ok() const { return status_.ok(); }

  // Ends the call. OK if nothing was outstanding and the server agreed.
  absl::Status Close();

  void Cancel() { context_.TryCancel(); }

 private:
  // Records the call's final status (the first error wins).
  absl::Status Fail(absl::Status status);

  const std::shared_ptr<const Connection> connection_;
  const std::string table_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriterInterface<SampleStreamRequest,
                                                    SampleStreamResponse>>
      stream_;
  // The response being read, parsed on an arena of its own (one block
  // allocation instead of one per message and string); samples point into
  // it and share its ownership, so each response gets a fresh one.
  std::shared_ptr<const void> response_owner_;
  SampleStreamResponse* response_ = nullptr;
  int next_entry_ = 0;  // Next unread entry of *response_.
  int64_t outstanding_ = 0;
  absl::Status status_;
  bool finished_ = false;  // Finish() has been called.
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SAMPLE_STREAM_H_
