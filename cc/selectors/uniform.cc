#include "cc/selectors/uniform.h"

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

absl::Status UniformSelector::Insert(Key key, double priority) {
  if (!index_.emplace(key, keys_.size()).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("Key ", key, " already inserted."));
  }
  keys_.push_back(key);
  return absl::OkStatus();
}

absl::Status UniformSelector::Update(Key key, double priority) {
  if (!index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  return absl::OkStatus();
}

absl::Status UniformSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  const size_t hole = it->second;
  index_.erase(it);
  if (hole != keys_.size() - 1) {
    keys_[hole] = keys_.back();
    index_[keys_[hole]] = hole;
  }
  keys_.pop_back();
  return absl::OkStatus();
}

ItemSelector::KeyWithProbability UniformSelector::Sample() {
  const size_t i = absl::Uniform<size_t>(bit_gen_, 0, keys_.size());
  return {keys_[i], 1.0 / keys_.size()};
}

void UniformSelector::Clear() {
  keys_.clear();
  index_.clear();
}

KeyDistributionOptions UniformSelector::options() const {
  KeyDistributionOptions options;
  options.set_uniform(true);
  options.set_is_deterministic(false);
  return options;
}

std::string UniformSelector::DebugString() const { return "UniformSelector"; }

}  // namespace deepmind::reverb
