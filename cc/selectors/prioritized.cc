#include "cc/selectors/prioritized.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

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

void PrioritizedSelector::UpdateMany(absl::Span<const Key> keys,
                                     absl::Span<const double> priorities,
                                     absl::Span<absl::Status> statuses) {
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  // The node of key i, found kUpdateAhead keys before its update: slot
  // i % kUpdateAhead (read for key i before it is written for key
  // i + kUpdateAhead). Updates move no node, so it stays valid.
  std::array<size_t, kUpdateAhead> ahead;
  const auto find = [&](size_t i) {
    auto it = index_.find(keys[i]);
    const size_t node = it == index_.end() ? kNone : it->second;
    if (node != kNone) PrefetchPath(node);
    ahead[i % kUpdateAhead] = node;
  };
  const size_t n = keys.size();
  for (size_t i = 0; i < std::min(n, 2 * kUpdateAhead); ++i) {
    index_.prefetch(keys[i]);
  }
  for (size_t i = 0; i < std::min(n, kUpdateAhead); ++i) find(i);
  for (size_t i = 0; i < n; ++i) {
    const size_t node = ahead[i % kUpdateAhead];
    if (absl::Status status = CheckPriority(priorities[i]); !status.ok()) {
      statuses[i] = std::move(status);
    } else if (node == kNone) {
      statuses[i] = absl::InvalidArgumentError(
          absl::StrCat("Key ", keys[i], " not found."));
    } else {
      SetWeight(node, Weight(priorities[i]));
      statuses[i] = absl::OkStatus();
    }
    if (i + 2 * kUpdateAhead < n) index_.prefetch(keys[i + 2 * kUpdateAhead]);
    if (i + kUpdateAhead < n) find(i + kUpdateAhead);
  }
}

void PrioritizedSelector::PrefetchPath(size_t index) const {
  size_t i = index;
  for (int level = 0; level < kPrefetchLevels; ++level) {
    __builtin_prefetch(&weights_[i]);
    __builtin_prefetch(&sums_[i]);
    if (2 * i + 1 < size_) __builtin_prefetch(&sums_[2 * i + 1]);
    if (i == 0) break;
    i = (i - 1) / 2;
  }
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
