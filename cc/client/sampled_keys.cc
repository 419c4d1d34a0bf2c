#include "cc/client/sampled_keys.h"

namespace deepmind::reverb {

SampledKeys::SampledKeys(int64_t capacity) : capacity_(capacity) {}

void SampledKeys::Record(uint64_t key, int shard) {
  MutexLock lock(&mu_);
  const int64_t slot = next_slot_;
  next_slot_ = (next_slot_ + 1) % capacity_;
  if (static_cast<int64_t>(ring_.size()) < capacity_) {
    ring_.push_back(key);
  } else {
    // Forget the oldest key, unless recorded again since.
    auto oldest = shards_.find(ring_[slot]);
    if (oldest != shards_.end() && oldest->second.slot == slot) {
      shards_.erase(oldest);
    }
    ring_[slot] = key;
  }
  shards_[key] = Where{shard, slot};
}

int SampledKeys::ShardOf(uint64_t key) const {
  MutexLock lock(&mu_);
  auto it = shards_.find(key);
  return it == shards_.end() ? -1 : it->second.shard;
}

}  // namespace deepmind::reverb
