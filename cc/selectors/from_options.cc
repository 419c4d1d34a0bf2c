#include "cc/selectors/from_options.h"

#include "cc/selectors/fifo.h"
#include "cc/selectors/heap.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"

namespace deepmind::reverb {

absl::StatusOr<std::unique_ptr<ItemSelector>> MakeSelector(
    const KeyDistributionOptions& options) {
  switch (options.distribution_case()) {
    case KeyDistributionOptions::kFifo:
      return std::make_unique<FifoSelector>();
    case KeyDistributionOptions::kLifo:
      return std::make_unique<LifoSelector>();
    case KeyDistributionOptions::kUniform:
      return std::make_unique<UniformSelector>();
    case KeyDistributionOptions::kPrioritized:
      return std::make_unique<PrioritizedSelector>(
          options.prioritized().priority_exponent());
    case KeyDistributionOptions::kHeap:
      return std::make_unique<HeapSelector>(options.heap().min_heap());
    case KeyDistributionOptions::DISTRIBUTION_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "KeyDistributionOptions has no distribution set.");
}

}  // namespace deepmind::reverb
