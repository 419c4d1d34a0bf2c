// StreamReactor: the base of the service's two bidirectional stream reactors
// (insert_reactor.h, sample_reactor.h), which read and write raw bytes.
//
// Lifetime: a reactor counts itself in `*open_streams` (the service's count,
// ReverbServiceImpl::num_open_streams) from its construction until it
// deletes itself in OnDone, gRPC's last reaction, but
// table callbacks it asked for may arrive later. Such callbacks hold the
// reactor's Guard (a shared_ptr, not the reactor) and reach the reactor only
// while `Guard::reactor` is set, under `Guard::mu`; Start sets it, OnDone
// clears it under the same mutex before deleting the reactor, so a late
// callback finds null and does nothing.
//
// Finishing: FinishOnce ends the call with the first status it is given
// and ignores later ones. Finish itself is called once no write is in
// flight: at once, or from the OnWriteDone of the write in flight. A write
// that fails ends the call with CANCELLED "Could not write to the stream.",
// OnCancel (the client has gone, or the server stops) with CANCELLED. A
// first status other than OK first calls `void OnFailingLocked()` of the
// derived reactor (with the mutex held), which withdraws the stream's
// requests still queued at tables (Table::Cancel).
//
// Threading: the gRPC reactions run on gRPC's threads, table callbacks on
// the calling thread or the table's worker. Everything a derived reactor
// shares between them is guarded by `guard_->mu`; the protected methods
// below but Start must be called with it held.
#ifndef REVERB_CC_SERVICE_STREAM_REACTOR_H_
#define REVERB_CC_SERVICE_STREAM_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "cc/support/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace deepmind::reverb {

// `Derived` is the reactor class itself (it is deleted as one in OnDone).
template <typename Derived, typename Request, typename Response>
class StreamReactor : public grpc::ServerBidiReactor<Request, Response> {
 public:
  // What table callbacks hold instead of the reactor.
  struct Guard {
    Mutex mu;
    Derived* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  explicit StreamReactor(std::atomic<int64_t>* open_streams)
      : guard_(std::make_shared<Guard>()), open_streams_(open_streams) {
    open_streams_->fetch_add(1, std::memory_order_relaxed);
  }

  void OnCancel() override {
    MutexLock lock(&guard_->mu);
    FinishOnce(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      MutexLock lock(&guard_->mu);
      guard_->reactor = nullptr;
    }
    std::atomic<int64_t>* const open_streams = open_streams_;
    delete static_cast<Derived*>(this);
    open_streams->fetch_sub(1, std::memory_order_relaxed);
  }

 protected:
  // Lets table callbacks reach the reactor, and starts the first read. Called
  // by the derived constructor, without the mutex.
  void Start(Request* request) {
    MutexLock lock(&guard_->mu);
    guard_->reactor = static_cast<Derived*>(this);
    this->StartRead(request);
  }

  const std::shared_ptr<Guard> guard_;

  // Finishes with `status` unless already finishing; waits for the write in
  // flight, if any.
  void FinishOnce(const grpc::Status& status) {
    if (finish_status_.has_value()) return;
    finish_status_ = status;
    if (!status.ok()) static_cast<Derived*>(this)->OnFailingLocked();
    if (!write_in_flight_) this->Finish(status);
  }
  bool finishing() const { return finish_status_.has_value(); }

  // Writes `response`, uncompressed (chunk data is compressed already). It
  // must stay unchanged until OnWriteDone.
  void StartWriteOf(const Response* response) {
    write_in_flight_ = true;
    this->StartWrite(response, grpc::WriteOptions().set_no_compression());
  }
  // To be called first by OnWriteDone. False if the reactor is finishing
  // (and has now called Finish).
  bool WriteDone(bool ok) {
    write_in_flight_ = false;
    if (finish_status_.has_value()) {  // Finish was deferred for this write.
      this->Finish(*finish_status_);
      return false;
    }
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED,
                              "Could not write to the stream."));
      return false;
    }
    return true;
  }
  bool write_in_flight() const { return write_in_flight_; }

 private:
  std::atomic<int64_t>* const open_streams_;
  bool write_in_flight_ = false;
  std::optional<grpc::Status> finish_status_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_STREAM_REACTOR_H_
