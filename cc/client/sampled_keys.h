// SampledKeys: the shard each recently sampled key came from, so that a
// Client over several shards sends the priority update or delete of a key
// to its shard only (client.h).
//
// Samplers of the client record each sample's key with the shard that
// served it (ShardedSampleStream). Keys are unique across shards and an
// item stays on the shard that stored it, so where a key was sampled is
// where it is. (Except an item a cut-off shard stored without confirming
// it, sampled there: it is deleted there once the shard answers again, and
// an update routed there is lost; the copy its writer sent elsewhere keeps
// its priority.) The last `capacity` keys recorded are remembered (a key
// recorded again counts from then): a learner updates the priorities of
// what it sampled soon after, long before 2^18 more samples. A key not
// remembered (never sampled by this client, or forgotten) is unknown:
// ShardOf() returns -1 and its update goes to every shard.
//
// Thread-safe.
#ifndef REVERB_CC_CLIENT_SAMPLED_KEYS_H_
#define REVERB_CC_CLIENT_SAMPLED_KEYS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

class REVERB_EXPORT SampledKeys {
 public:
  static constexpr int64_t kCapacity = 1 << 18;

  // `capacity` >= 1.
  explicit SampledKeys(int64_t capacity = kCapacity);

  // `key` was sampled from `shard` (>= 0).
  void Record(uint64_t key, int shard) ABSL_LOCKS_EXCLUDED(mu_);

  // The shard `key` was last sampled from, or -1 if unknown.
  int ShardOf(uint64_t key) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Where {
    int shard;
    // Its slot in ring_.
    int64_t slot;
  };

  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, Where> shards_ ABSL_GUARDED_BY(mu_);
  // The keys in the order recorded, oldest overwritten first; a slot whose
  // key was recorded again since is stale (shards_ names another slot).
  std::vector<uint64_t> ring_ ABSL_GUARDED_BY(mu_);
  const int64_t capacity_;
  int64_t next_slot_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SAMPLED_KEYS_H_
