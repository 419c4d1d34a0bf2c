// HeapSelector: deterministically picks the key with the lowest (min-heap) or
// highest (max-heap) priority. Ties go to the key that was least recently
// inserted or updated. Sample() returns probability 1.0 and does not remove
// the key. Insert, Update and Delete are O(log n); NaN priorities are
// rejected because they have no place in an order.
#ifndef REVERB_CC_SELECTORS_HEAP_H_
#define REVERB_CC_SELECTORS_HEAP_H_

#include <cstdint>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "cc/selectors/interface.h"

namespace deepmind::reverb {

class REVERB_EXPORT HeapSelector : public ItemSelector {
 public:
  explicit HeapSelector(bool min_heap = true);

  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  absl::Status Delete(Key key) override;
  KeyWithProbability Sample() override;
  void Clear() override;
  int64_t size() const override { return order_.size(); }
  KeyDistributionOptions options() const override;
  std::string DebugString() const override;

 private:
  // (priority * sign, update number, key): the first element is the pick.
  using Node = std::tuple<double, uint64_t, Key>;

  Node MakeNode(Key key, double priority);

  const bool min_heap_;
  uint64_t update_count_ = 0;
  std::set<Node> order_;
  absl::flat_hash_map<Key, Node> nodes_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SELECTORS_HEAP_H_
