#include "cc/client/shard_picker.h"

namespace deepmind::reverb {

ShardPicker::Pick ShardPicker::Next(const Shards::Weights& weights) {
  const int n = static_cast<int>(weights.weight.size());
  if (!(weights.total > 0)) return {};
  if (weights.round_robin) {
    for (int i = 0; i < n; ++i) {
      const int s = (next_ + i) % n;
      if (weights.weight[s] > 0) {
        next_ = (s + 1) % n;
        return {s, 1.0};
      }
    }
    return {};
  }
  const double u = absl::Uniform(random_, 0.0, weights.total);
  double sum = 0;
  int last = -1;
  for (int s = 0; s < n; ++s) {
    if (!(weights.weight[s] > 0)) continue;
    sum += weights.weight[s];
    last = s;
    if (u < sum) break;
  }
  // `last` also catches a `u` that rounding left above the sum.
  return {last, weights.weight[last] / weights.total};
}

}  // namespace deepmind::reverb
