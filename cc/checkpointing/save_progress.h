// SaveProgress: how a Checkpointer's saves go, for other threads to read at
// any time (metrics, ServerInfo's checkpoint_progress): whether one runs,
// its chunk bytes written of their total, since when, and the totals and
// last result of the saves that ended. The saving thread calls Begin,
// SetTotal, Add and End, in that order, one save at a time; Read may be
// called from any thread (relaxed atomics: a read during a save may see a
// mix of two moments, never a torn value).
#ifndef REVERB_CC_CHECKPOINTING_SAVE_PROGRESS_H_
#define REVERB_CC_CHECKPOINTING_SAVE_PROGRESS_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT SaveProgress {
 public:
  struct Snapshot {
    bool saving = false;
    // Of the save running (or the last one).
    int64_t bytes_done = 0;
    int64_t bytes_total = 0;
    absl::Duration elapsed;  // Of the save running; zero if none.
    // Saves that ended, and those of them that failed.
    int64_t saves = 0;
    int64_t failures = 0;
    // The last save that succeeded: its duration and the bytes of its files.
    absl::Duration last_duration;
    int64_t last_bytes = 0;
  };

  void Begin();
  // The chunk bytes the save writes.
  void SetTotal(int64_t bytes);
  void Add(int64_t bytes);
  // `file_bytes`: the size of the checkpoint written (ignored if !ok).
  void End(bool ok, int64_t file_bytes);

  Snapshot Read() const;

 private:
  std::atomic<bool> saving_{false};
  std::atomic<int64_t> started_nanos_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<int64_t> total_{0};
  std::atomic<int64_t> saves_{0};
  std::atomic<int64_t> failures_{0};
  std::atomic<int64_t> last_nanos_{0};
  std::atomic<int64_t> last_bytes_{0};
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CHECKPOINTING_SAVE_PROGRESS_H_
