// Process-wide abseil Mutex settings, applied when libreverb is loaded.
//
// Debian builds abseil with Mutex deadlock detection on (it keeps a graph of
// lock orders and updates it on every acquisition while another lock is
// held), which costs much of the CPU time of lock-heavy paths (a writer's
// throughput nearly doubles without it). Our lock
// orders are fixed by design and documented where the locks are declared,
// so it is turned off.
#include "absl/synchronization/mutex.h"

namespace deepmind::reverb {
namespace {

const bool kMutexSettingsApplied = [] {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return true;
}();

}  // namespace
}  // namespace deepmind::reverb
