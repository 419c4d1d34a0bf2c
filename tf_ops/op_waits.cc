#include "tf_ops/op_waits.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace deepmind::reverb::tf_ops {
namespace {

// The handler that was in place before ours, and the pipe through which
// ours wakes the thread that ends the waits (a signal handler may only do
// async-signal-safe things, such as write()).
struct sigaction previous_handler;
int interrupt_pipe[2] = {-1, -1};

// How long the signal is held back while the ops' errors reach Python.
constexpr int kPassOnDelayMs = 50;

void OnInterrupt(int signal_number) {
  if (!OpWaits::Global().waiting()) {
    previous_handler.sa_handler(signal_number);
    return;
  }
  const int saved_errno = errno;
  const char byte = 0;
  if (write(interrupt_pipe[1], &byte, 1) < 0) {
    // Nothing to do about it in a signal handler: pass the signal on.
    previous_handler.sa_handler(signal_number);
  }
  errno = saved_errno;
}

// Ends the waits in progress for each interrupt, then passes it on.
void EndWaitsOnInterrupts() {
  char byte;
  while (true) {
    const ssize_t n = read(interrupt_pipe[0], &byte, 1);
    if (n == 1) {
      OpWaits::Global().EndAll(/*for_good=*/false);
      std::this_thread::sleep_for(std::chrono::milliseconds(kPassOnDelayMs));
      previous_handler.sa_handler(SIGINT);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

}  // namespace

OpWaits& OpWaits::Global() {
  static OpWaits* const waits = new OpWaits();
  return *waits;
}

uint64_t OpWaits::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

absl::Status OpWaits::Check(uint64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckLocked(generation);
}

absl::Status OpWaits::CheckLocked(uint64_t generation) const {
  if (over_) {
    return absl::CancelledError("Reverb op cancelled: the process is exiting.");
  }
  if (generation != generation_) {
    return absl::CancelledError("Reverb op cancelled by an interrupt.");
  }
  return absl::OkStatus();
}

absl::Status OpWaits::Begin(uint64_t generation,
                            SampleStreamInterface* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status status = CheckLocked(generation);
  if (!status.ok()) return status;
  if (stream != nullptr) streams_.insert(stream);
  ++waiting_;
  return absl::OkStatus();
}

void OpWaits::End(SampleStreamInterface* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream != nullptr) streams_.erase(stream);
  --waiting_;
}

void OpWaits::EndAll(bool for_good) {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  over_ = over_ || for_good;
  for (SampleStreamInterface* stream : streams_) stream->Cancel();
}

void WatchInterrupts() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGINT, nullptr, &current) != 0 ||
        (current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler == SIG_DFL ||
        current.sa_handler == SIG_IGN ||
        pipe2(interrupt_pipe, O_CLOEXEC) != 0) {
      return;
    }
    previous_handler = current;
    std::thread(&EndWaitsOnInterrupts).detach();
    struct sigaction ours = current;
    ours.sa_handler = &OnInterrupt;
    sigaction(SIGINT, &ours, nullptr);
  });
}

}  // namespace deepmind::reverb::tf_ops

void ReverbTfClientCancelWaits() {
  deepmind::reverb::tf_ops::OpWaits::Global().EndAll(/*for_good=*/true);
}

void ReverbTfClientWatchInterrupts() {
  deepmind::reverb::tf_ops::WatchInterrupts();
}
