#include "cc/selectors/prioritized.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

PrioritizedSelector::PrioritizedSelector(double priority_exponent)
    : PrioritizedSelector(priority_exponent, std::random_device()()) {}

PrioritizedSelector::PrioritizedSelector(double priority_exponent,
                                         uint64_t seed)
    : priority_exponent_(priority_exponent),
      rng_(seed),
      keys_(kInitialCapacity),
      weights_(kInitialCapacity),
      sums_(kInitialCapacity) {}

absl::Status PrioritizedSelector::CheckPriority(double priority) const {
  // dm-reverb's texts.
  if (std::isnan(priority)) {
    return absl::InvalidArgumentError("Priority must not be NaN.");
  }
  if (priority < 0) {
    return absl::InvalidArgumentError("Priority must not be negative.");
  }
  return absl::OkStatus();
}

double PrioritizedSelector::Weight(double priority) const {
  return priority == 0 ? 0.0 : std::pow(priority, priority_exponent_);
}

absl::Status PrioritizedSelector::Insert(Key key, double priority) {
  if (auto status = CheckPriority(priority); !status.ok()) return status;
  if (!index_.emplace(key, size_).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("Key ", key, " already inserted."));
  }
  if (size_ == keys_.size()) {
    keys_.resize(2 * size_);
    weights_.resize(2 * size_);
    sums_.resize(2 * size_);
  }
  const size_t index = size_++;
  keys_[index] = key;
  weights_[index] = 0;
  sums_[index] = 0;
  SetWeight(index, Weight(priority));
  return absl::OkStatus();
}

absl::Status PrioritizedSelector::Update(Key key, double priority) {
  if (auto status = CheckPriority(priority); !status.ok()) return status;
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  SetWeight(it->second, Weight(priority));
  return absl::OkStatus();
}

absl::Status PrioritizedSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  const size_t hole = it->second;
  index_.erase(it);
  const size_t last = size_ - 1;
  if (hole != last) {
    // Move the last node's key and weight into the hole.
    const double last_weight = weights_[last];
    SetWeight(last, 0);
    keys_[hole] = keys_[last];
    index_[keys_[hole]] = hole;
    SetWeight(hole, last_weight);
  } else {
    SetWeight(last, 0);
  }
  keys_[last] = 0;
  sums_[last] = 0;
  --size_;
  return absl::OkStatus();
}

void PrioritizedSelector::SetWeight(size_t index, double weight) {
  const double diff = weight - weights_[index];
  weights_[index] = weight;
  bool drifted = false;
  for (size_t i = index;; i = (i - 1) / 2) {
    sums_[i] = std::max(0.0, sums_[i] + diff);
    const double exact =
        weights_[i] + ChildSum(2 * i + 1) + ChildSum(2 * i + 2);
    drifted |= std::abs(exact - sums_[i]) > kMaxApproximationError;
    if (i == 0) break;
  }
  if (drifted) RecomputeSums();
}

void PrioritizedSelector::RecomputeSums() {
  ++num_recomputations_;
  for (size_t i = size_; i-- > 0;) {
    sums_[i] = weights_[i] + ChildSum(2 * i + 1) + ChildSum(2 * i + 2);
  }
}

size_t PrioritizedSelector::Descend(double target) const {
  size_t i = 0;
  while (true) {
    const size_t left = 2 * i + 1;
    const double left_sum = ChildSum(left);
    if (target < left_sum) {
      i = left;
      continue;
    }
    target -= left_sum;
    const double right_sum = ChildSum(left + 1);
    if (target < right_sum) {
      i = left + 1;
      continue;
    }
    return i;
  }
}

ItemSelector::KeyWithProbability PrioritizedSelector::Sample() {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double total = sums_[0];
  if (total > 0) {
    size_t i = Descend(u * total);
    if (weights_[i] <= 0) {
      // Only drifted sums can lead the descent to a weightless node; exact
      // sums cannot, so recompute them and descend again.
      RecomputeSums();
      total = sums_[0];
      i = Descend(u * total);
    }
    if (weights_[i] > 0) return {keys_[i], weights_[i] / total};
  }
  return {keys_[static_cast<size_t>(u * size_)], 1.0 / size_};
}

void PrioritizedSelector::Clear() {
  for (size_t i = 0; i < size_; ++i) {
    keys_[i] = 0;
    weights_[i] = 0;
    sums_[i] = 0;
  }
  size_ = 0;
  index_.clear();
}

KeyDistributionOptions PrioritizedSelector::options() const {
  KeyDistributionOptions options;
  options.mutable_prioritized()->set_priority_exponent(priority_exponent_);
  options.set_is_deterministic(false);
  return options;
}

std::string PrioritizedSelector::DebugString() const {
  return absl::StrCat(
      "PrioritizedSelector(priority_exponent=", priority_exponent_, ")");
}

}  // namespace deepmind::reverb
