// SampleReactor: the server side of one SampleStream (docs/wire-protocol.md,
// "SampleStream").
//
// On the wire: reads SampleStreamRequests and writes SampleStreamResponses,
// both as raw bytes; responses are encoded by AppendSamples
// (cc/wire/sample_response.h), with the chunks of each sample in its
// entries, every time it is sampled. A stream whose requests carry the
// server's shared-memory secret gets the chunks kept in shared memory as
// links to them instead, and responses of
// SharedMemoryHost::kMinResponseBytes or more in segments of its own
// (SharedMemoryHost::Lender); they are removed when the call ends.
//  - A request is served with exactly `num_samples` samples of its table, or
//    the call ends with an error; then the next request is read. A request
//    that does not parse or has `num_samples` <= 0 or above the server's
//    max_samples_per_request ends the call with INVALID_ARGUMENT, an
//    unknown table with NOT_FOUND.
//  - `rate_limiter_timeout` (if > 0 ms) bounds the wait for each table
//    batch: one that gets no sample in time ends the call with the table's
//    DEADLINE_EXCEEDED. Samples already written stay delivered.
//  - When the client half-closes, the call ends with OK once every sample
//    owed has been written.
//
// Flow control: samples are asked of the table in flexible batches of
// kInitialSampleBatchSize, then twice as many each time (at most the
// samples still owed, max_samples_per_request and 2^20, and closed once
// they reference Table::kMaxSampleBatchBytes of chunks, or
// kMaxLentSampleBatchBytes on a stream that borrows shared memory), one batch
// at a time and none while kMaxQueuedResponses responses wait to be written
// or, on a stream that gets bytes, while they hold kMaxQueuedSampleBytes (a
// batch then closes at the room left).
// Each batch starts a response; one is also started when the current one has
// reached kMaxSampleResponseBytes (constants of ReverbServiceImpl). A write the
// client's flow control holds for the server's stalled_sample_stream_timeout
// cancels the call (CANCELLED): the responses it holds are freed.
//
// Threading and lifetime: see stream_reactor.h. Batches of up to 64 KiB of
// chunks are encoded on the table's worker, larger ones on the service's
// executor. When the call fails (the client goes, a write fails), the batch
// waiting in the table, if any, is withdrawn (Table::Cancel): it must not
// take items the stream would then lose. Made by
// ReverbServiceImpl::SampleStream; the service must outlive it.
#ifndef REVERB_CC_SERVICE_SAMPLE_REACTOR_H_
#define REVERB_CC_SERVICE_SAMPLE_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/core/table.h"
#include "cc/core/table_item.h"
#include "cc/service/service_metrics.h"
#include "cc/service/shared_memory_host.h"
#include "cc/service/stream_reactor.h"
#include "cc/wire/sample_response.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {

class ReverbServiceImpl;

class SampleReactor
    : public StreamReactor<SampleReactor, grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts reading. Tables are looked up in `service`, large batches are
  // encoded on its executor. `context` is the call's (to cancel it).
  SampleReactor(ReverbServiceImpl* service,
                grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;

 private:
  // Asks the table for the next batch, if one is due.
  void RequestSamplesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // A batch (or the table's error) has come.
  void OnSampled(absl::StatusOr<std::vector<SampledItem>> samples)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // Writes the front response, unless a write is in flight.
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // Stall detection: one alarm at a time, at the deadline of the write in
  // flight when it was set; when it fires, a write that has been in flight
  // for stall_timeout_ cancels the call, a later one sets the alarm again
  // (so writes cost no alarm of their own).
  void ArmStallAlarmLocked(absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  void OnStallAlarm() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // Finishes with OK once the client is done and everything is written.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  // Withdraws the table request in flight (see stream_reactor.h).
  void OnFailingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  friend StreamReactor;

  ReverbServiceImpl* const service_;
  const ServiceMetrics::OpenStream open_stream_;
  grpc::CallbackServerContext* const context_;
  const absl::Duration stall_timeout_;
  grpc::ByteBuffer request_bytes_;
  SampleStreamRequest request_;

  std::shared_ptr<Table> table_ ABSL_GUARDED_BY(guard_->mu);
  const Table::Cancellation cancellation_ =
      std::make_shared<std::atomic<bool>>(false);
  absl::Duration timeout_ ABSL_GUARDED_BY(guard_->mu);
  // Samples of the current request not yet handed to responses.
  int64_t remaining_ ABSL_GUARDED_BY(guard_->mu) = 0;
  int64_t next_batch_size_ ABSL_GUARDED_BY(guard_->mu);
  bool table_request_in_flight_ ABSL_GUARDED_BY(guard_->mu) = false;
  // When the table request in flight was made (for the sample latency).
  absl::Time table_request_made_ ABSL_GUARDED_BY(guard_->mu);
  bool reads_done_ ABSL_GUARDED_BY(guard_->mu) = false;
  // Responses to write; the front one is in flight while a write is.
  std::deque<SampleResponseBytes> responses_ ABSL_GUARDED_BY(guard_->mu);
  // Set once a request carries the server's shared-memory secret: chunks
  // kept in segments then go as links (shared_memory_host.h).
  std::unique_ptr<SharedMemoryHost::Lender> lender_ ABSL_GUARDED_BY(guard_->mu);
  // Unused if stall_timeout_ is infinite.
  std::unique_ptr<grpc::Alarm> stall_alarm_ ABSL_GUARDED_BY(guard_->mu);
  bool stall_alarm_armed_ ABSL_GUARDED_BY(guard_->mu) = false;
  absl::Time write_started_ ABSL_GUARDED_BY(guard_->mu);
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_SAMPLE_REACTOR_H_
