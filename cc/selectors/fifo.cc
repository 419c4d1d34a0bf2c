#include "cc/selectors/fifo.h"

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

absl::Status InsertionOrderSelector::Insert(Key key, double priority) {
  if (position_.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Key ", key, " already inserted."));
  }
  auto it = newest_first_ ? keys_.insert(keys_.begin(), key)
                          : keys_.insert(keys_.end(), key);
  position_.emplace(key, it);
  return absl::OkStatus();
}

absl::Status InsertionOrderSelector::Update(Key key, double priority) {
  if (!position_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  return absl::OkStatus();
}

absl::Status InsertionOrderSelector::Delete(Key key) {
  auto it = position_.find(key);
  if (it == position_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  keys_.erase(it->second);
  position_.erase(it);
  return absl::OkStatus();
}

ItemSelector::KeyWithProbability InsertionOrderSelector::Sample() {
  return {keys_.front(), 1.0};
}

void InsertionOrderSelector::Clear() {
  keys_.clear();
  position_.clear();
}

KeyDistributionOptions InsertionOrderSelector::options() const {
  KeyDistributionOptions options;
  if (newest_first_) {
    options.set_lifo(true);
  } else {
    options.set_fifo(true);
  }
  options.set_is_deterministic(true);
  return options;
}

std::string InsertionOrderSelector::DebugString() const {
  return newest_first_ ? "LifoSelector" : "FifoSelector";
}

}  // namespace deepmind::reverb
