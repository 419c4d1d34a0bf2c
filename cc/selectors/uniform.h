// UniformSelector: every key is equally likely (probability 1/size).
// All operations are O(1): keys live in a dense vector and a delete moves the
// last key into the hole.
#ifndef REVERB_CC_SELECTORS_UNIFORM_H_
#define REVERB_CC_SELECTORS_UNIFORM_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "cc/selectors/interface.h"

namespace deepmind::reverb {

class REVERB_EXPORT UniformSelector : public ItemSelector {
 public:
  UniformSelector() = default;

  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  absl::Status Delete(Key key) override;
  KeyWithProbability Sample() override;
  void Clear() override;
  bool uses_priorities() const override { return false; }
  int64_t size() const override { return keys_.size(); }
  KeyDistributionOptions options() const override;
  std::string DebugString() const override;

 private:
  std::vector<Key> keys_;
  absl::flat_hash_map<Key, size_t> index_;
  absl::BitGen bit_gen_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SELECTORS_UNIFORM_H_
