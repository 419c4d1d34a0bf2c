// PrioritizedSelector: picks key i with probability w_i / sum(w), where
// w_i = priority_i ^ priority_exponent, and w_i = 0 when priority_i = 0 (also
// for exponent 0). When every weight is 0 it picks uniformly (1/size).
// NaN and negative priorities are rejected with INVALID_ARGUMENT.
//
// The weights live in an array-embedded sum tree: node i holds one key, its
// weight and the sum of the weights in its subtree (children 2i+1, 2i+2), so
// Insert, Update, Delete and Sample are O(log n). Incremental updates of the
// sums accumulate floating point error; when an update finds a node whose sum
// is off by more than kMaxApproximationError the whole tree is recomputed.
#ifndef REVERB_CC_SELECTORS_PRIORITIZED_H_
#define REVERB_CC_SELECTORS_PRIORITIZED_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cc/selectors/interface.h"

namespace deepmind::reverb {

class REVERB_EXPORT PrioritizedSelector : public ItemSelector {
 public:
  static constexpr double kMaxApproximationError = 1e-4;
  static constexpr size_t kInitialCapacity = 1 << 17;

  // `seed` makes the sequence of samples reproducible; by default it is drawn
  // from std::random_device.
  explicit PrioritizedSelector(double priority_exponent);
  PrioritizedSelector(double priority_exponent, uint64_t seed);

  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  // Looks each key up, and prefetches its node and the lowest of its
  // ancestors, kUpdateAhead keys before updating it: in a table larger than
  // the cache those misses overlap instead of coming one after another.
  void UpdateMany(absl::Span<const Key> keys,
                  absl::Span<const double> priorities,
                  absl::Span<absl::Status> statuses) override;
  static constexpr size_t kUpdateAhead = 8;
  absl::Status Delete(Key key) override;
  KeyWithProbability Sample() override;
  void Clear() override;
  int64_t size() const override { return size_; }
  double weight_sum() const override { return size_ > 0 ? sums_[0] : 0; }
  KeyDistributionOptions options() const override;
  std::string DebugString() const override;

  // Number of times the sums were recomputed from scratch (for tests).
  int64_t num_recomputations() const { return num_recomputations_; }

 private:
  absl::Status CheckPriority(double priority) const;
  double Weight(double priority) const;
  // Sets the weight of node `index` and propagates the change to the root.
  void SetWeight(size_t index, double weight);
  // Prefetches what SetWeight(index, ...) reads first: the node, its
  // children and the lowest kPrefetchLevels - 1 of its ancestors with theirs.
  static constexpr int kPrefetchLevels = 6;
  void PrefetchPath(size_t index) const;
  double ChildSum(size_t child) const {
    return child < size_ ? sums_[child] : 0.0;
  }
  void RecomputeSums();
  // Index of the node that owns the point `target` of [0, sums_[0]).
  size_t Descend(double target) const;

  const double priority_exponent_;
  std::mt19937_64 rng_;
  size_t size_ = 0;
  // Structure of arrays over the nodes [0, size_).
  std::vector<Key> keys_;
  std::vector<double> weights_;
  std::vector<double> sums_;
  absl::flat_hash_map<Key, size_t> index_;
  int64_t num_recomputations_ = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SELECTORS_PRIORITIZED_H_
