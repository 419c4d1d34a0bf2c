// SampleStreamInterface: samples of one table, asked for and read from the
// calling thread. A SampleStream is one call to one server
// (sample_stream.h); a ShardedSampleStream draws from several
// (sharded_sample_stream.h). The Sampler, Client.sample and the TensorFlow
// ops read either through this interface.
//
// Request(n) asks for n more samples; Read() returns them one by one, in
// the order asked for. The stream can be reused for further requests once
// everything requested has been read.
//
// Not thread-safe, except Cancel(), which may be called from any thread.
#ifndef REVERB_CC_CLIENT_SAMPLE_STREAM_INTERFACE_H_
#define REVERB_CC_CLIENT_SAMPLE_STREAM_INTERFACE_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/sample.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT SampleStreamInterface {
 public:
  virtual ~SampleStreamInterface() = default;

  // Asks for `n` (>= 1) more samples. DEADLINE_EXCEEDED comes (from Read)
  // if the table's rate limiter holds a request longer than
  // `rate_limiter_timeout` (infinite or zero: never). The timeout goes out
  // in whole milliseconds, at least 1; a SampleStream also holds it on the
  // client, should the server not answer (sample_stream.h). Returns the
  // stream's final status if it has ended.
  virtual absl::Status Request(int64_t n,
                               absl::Duration rate_limiter_timeout) = 0;

  // The next requested sample. Once the stream has ended: its final status
  // (UNAVAILABLE if the server ended it without an error). A sample that
  // cannot be unpacked is returned as an error and ends the stream.
  virtual absl::StatusOr<Sample> Read() = 0;
  // As Read(), but leaves the sample packed (for the caller to unpack,
  // perhaps on another thread).
  absl::StatusOr<PackedSample> ReadPacked() {
    return ReadPacked([](SampleInfo*) {});
  }
  // As ReadPacked(), first calling `edit_info` on the sample's info (which
  // nothing else references yet): how a ShardedSampleStream rewrites it
  // without a copy.
  virtual absl::StatusOr<PackedSample> ReadPacked(
      absl::FunctionRef<void(SampleInfo*)> edit_info) = 0;

  // True if the next Read() can start from a response already received
  // (it may still have to wait if the sample continues in the next one).
  virtual bool has_buffered_entries() const = 0;

  // Samples requested and not yet read.
  virtual int64_t outstanding() const = 0;
  // False once the stream has ended or failed.
  virtual bool ok() const = 0;

  // Ends the stream. OK if nothing was outstanding and the servers agreed;
  // CANCELLED if samples were outstanding.
  virtual absl::Status Close() = 0;

  // Ends the stream from any thread: a Read() waiting returns CANCELLED.
  virtual void Cancel() = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SAMPLE_STREAM_INTERFACE_H_
