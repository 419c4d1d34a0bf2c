// OpWaits: the blocking waits of the TFClient ops in progress (a sample
// waiting for the rate limiter, an insert waiting for its confirmation),
// and what ends them.
//
// TensorFlow's C kernel API tells a kernel nothing of cancellation (a v1
// Session's close or timeout, an interrupted eager call), so a wait that
// may last forever must be ended another way:
//   - Exit(): the process is exiting (the Python package calls it before
//     the interpreter waits for its threads); waits in progress and later
//     ones fail with CANCELLED.
//   - SIGINT, once WatchInterrupts() has put a handler in front of the
//     process's (Python's): while a wait is in progress, ours ends the waits
//     in progress (CANCELLED; later ones run as usual) and passes the
//     signal on to the previous handler a moment later, once the op's error
//     has reached Python, which then raises KeyboardInterrupt as usual
//     (passed on at once, Python would raise it while it makes the op's
//     exception, which would come out as a RuntimeError). With no wait in
//     progress the signal is passed on at once.
// Part of libreverb_tf_ops' Reverb side (see client_bridge.h).
#ifndef REVERB_TF_OPS_OP_WAITS_H_
#define REVERB_TF_OPS_OP_WAITS_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "absl/status/status.h"
#include "cc/client/sample_stream_interface.h"

namespace deepmind::reverb::tf_ops {

class OpWaits {
 public:
  // The one instance; never destroyed (ops may run while the process
  // exits).
  static OpWaits& Global();

  // Called when an op starts: the generation its waits belong to.
  uint64_t generation() const;

  // CANCELLED if the waits of `generation` have been ended.
  absl::Status Check(uint64_t generation) const;

  // Registers a wait about to start, with the stream it reads (if any) for
  // EndAll to cancel; CANCELLED (nothing registered) if the waits of
  // `generation` have been ended. Each Begin that succeeds needs an End.
  absl::Status Begin(uint64_t generation,
                     SampleStreamInterface* stream = nullptr);
  void End(SampleStreamInterface* stream = nullptr);

  // Whether a wait is in progress (async-signal-safe).
  bool waiting() const { return waiting_.load() > 0; }

  // Ends the waits in progress; `for_good` ends later ones at once too.
  void EndAll(bool for_good);

 private:
  OpWaits() = default;
  absl::Status CheckLocked(uint64_t generation) const;  // mu_ held.

  mutable std::mutex mu_;
  // Guarded by mu_: bumped by EndAll; whether EndAll(for_good=true) was
  // called; the streams waiting.
  uint64_t generation_ = 0;
  bool over_ = false;
  std::unordered_set<SampleStreamInterface*> streams_;
  std::atomic<int> waiting_{0};  // Waits begun and not ended.
};

// Chains a SIGINT handler that ends the waits in progress in front of the
// current one, if that is a handler function (Python's, normally). Once.
void WatchInterrupts();

}  // namespace deepmind::reverb::tf_ops

// For the Python package (through ctypes): EndAll(for_good=true), and
// WatchInterrupts().
extern "C" {
__attribute__((visibility("default"))) void ReverbTfClientCancelWaits();
__attribute__((visibility("default"))) void ReverbTfClientWatchInterrupts();
}

#endif  // REVERB_TF_OPS_OP_WAITS_H_
