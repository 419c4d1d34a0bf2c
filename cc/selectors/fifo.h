// FifoSelector and LifoSelector: deterministic selectors that pick by
// insertion order (oldest first, respectively newest first). Priorities are
// ignored and updates do not move keys. Sample() returns probability 1.0.
// All operations are O(1).
#ifndef REVERB_CC_SELECTORS_FIFO_H_
#define REVERB_CC_SELECTORS_FIFO_H_

#include <list>

#include "absl/container/flat_hash_map.h"
#include "cc/selectors/interface.h"

namespace deepmind::reverb {

// Shared implementation: keys in a list ordered by insertion, sampled from
// the front; `newest_first` decides at which end new keys go.
class REVERB_EXPORT InsertionOrderSelector : public ItemSelector {
 public:
  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  absl::Status Delete(Key key) override;
  KeyWithProbability Sample() override;
  void Clear() override;
  bool uses_priorities() const override { return false; }
  int64_t size() const override { return keys_.size(); }
  KeyDistributionOptions options() const override;
  std::string DebugString() const override;

 protected:
  explicit InsertionOrderSelector(bool newest_first)
      : newest_first_(newest_first) {}

 private:
  const bool newest_first_;
  std::list<Key> keys_;
  absl::flat_hash_map<Key, std::list<Key>::iterator> position_;
};

class REVERB_EXPORT FifoSelector : public InsertionOrderSelector {
 public:
  FifoSelector() : InsertionOrderSelector(/*newest_first=*/false) {}
};

class REVERB_EXPORT LifoSelector : public InsertionOrderSelector {
 public:
  LifoSelector() : InsertionOrderSelector(/*newest_first=*/true) {}
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SELECTORS_FIFO_H_
