// DeadlineWatchdog: cancels blocking gRPC calls at a deadline of their own,
// for the waits gRPC's synchronous API cannot bound: a read of a stream
// that stays open across requests (a stream's context has one deadline, for
// the whole call).
//
// One process-wide thread ("reverb-deadline", started on first use) sleeps
// until the earliest armed deadline and calls TryCancel() on the contexts
// whose deadline has passed. Arming a deadline later than the earliest one
// does not wake it, so the usual pattern (arm now + t before each read,
// disarm after it) costs a lock and a map update per read.
//
// Thread-safe.
#ifndef REVERB_CC_CLIENT_DEADLINE_WATCHDOG_H_
#define REVERB_CC_CLIENT_DEADLINE_WATCHDOG_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "grpcpp/client_context.h"

namespace deepmind::reverb {

class REVERB_EXPORT DeadlineWatchdog {
 public:
  // The process's watchdog (never destroyed).
  static DeadlineWatchdog& Get();

  // Cancels `context` at `deadline` unless Disarm(id) comes first.
  int64_t Arm(grpc::ClientContext* context, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // True if the deadline had passed and `context` was cancelled. Once this
  // returns the watchdog no longer touches `context`.
  bool Disarm(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  DeadlineWatchdog();
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  struct Armed {
    grpc::ClientContext* context;
    absl::Time deadline;
    bool fired = false;
  };
  Mutex mu_;
  CondVar wake_;
  absl::flat_hash_map<int64_t, Armed> armed_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  // The deadline the thread sleeps until (InfiniteFuture: none).
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_DEADLINE_WATCHDOG_H_
