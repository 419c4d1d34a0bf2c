#include "cc/selectors/heap.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {
namespace {

absl::Status CheckOrderable(Key key, double priority) {
  if (std::isnan(priority)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Priority must not be NaN for a heap selector (key ", key, ")."));
  }
  return absl::OkStatus();
}

}  // namespace

HeapSelector::HeapSelector(bool min_heap) : min_heap_(min_heap) {}

HeapSelector::Node HeapSelector::MakeNode(Key key, double priority) {
  return Node(min_heap_ ? priority : -priority, update_count_++, key);
}

absl::Status HeapSelector::Insert(Key key, double priority) {
  if (auto status = CheckOrderable(key, priority); !status.ok()) return status;
  if (nodes_.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Key ", key, " already inserted."));
  }
  Node node = MakeNode(key, priority);
  order_.insert(node);
  nodes_.emplace(key, node);
  return absl::OkStatus();
}

absl::Status HeapSelector::Update(Key key, double priority) {
  if (auto status = CheckOrderable(key, priority); !status.ok()) return status;
  auto it = nodes_.find(key);
  if (it == nodes_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  order_.erase(it->second);
  it->second = MakeNode(key, priority);
  order_.insert(it->second);
  return absl::OkStatus();
}

absl::Status HeapSelector::Delete(Key key) {
  auto it = nodes_.find(key);
  if (it == nodes_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  order_.erase(it->second);
  nodes_.erase(it);
  return absl::OkStatus();
}

ItemSelector::KeyWithProbability HeapSelector::Sample() {
  return {std::get<2>(*order_.begin()), 1.0};
}

void HeapSelector::Clear() {
  order_.clear();
  nodes_.clear();
}

KeyDistributionOptions HeapSelector::options() const {
  KeyDistributionOptions options;
  options.mutable_heap()->set_min_heap(min_heap_);
  options.set_is_deterministic(true);
  return options;
}

std::string HeapSelector::DebugString() const {
  return absl::StrCat("HeapSelector(sign=", min_heap_ ? 1 : -1, ")");
}

}  // namespace deepmind::reverb
