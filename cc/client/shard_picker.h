// ShardPicker: draws the shard of each sample of a table over several
// shards, from the weights Shards::GetWeights gives (shards.h).
//
// Weighted tables (Uniform, Prioritized): shard s with probability
// weight[s] / total, each draw independent of the others. Round-robin
// tables (Fifo, Lifo, heaps): the shards with a positive weight in turn,
// from where the last draw left off.
//
// Not thread-safe.
#ifndef REVERB_CC_CLIENT_SHARD_PICKER_H_
#define REVERB_CC_CLIENT_SHARD_PICKER_H_

#include "absl/random/random.h"
#include "cc/client/shards.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT ShardPicker {
 public:
  struct Pick {
    // -1 if no shard has a positive weight.
    int shard = -1;
    // The probability of having drawn `shard`: weight / total, or 1 for a
    // round-robin table (whose samples keep the probability their shard
    // gives them).
    double share = 0;
  };

  Pick Next(const Shards::Weights& weights);

 private:
  absl::BitGen random_;
  // Round robin: the shard to try first.
  int next_ = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SHARD_PICKER_H_
