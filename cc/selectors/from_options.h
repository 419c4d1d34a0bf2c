// Builds a selector from its KeyDistributionOptions (as stored in TableInfo
// and checkpoints). INVALID_ARGUMENT if no distribution is set.
#ifndef REVERB_CC_SELECTORS_FROM_OPTIONS_H_
#define REVERB_CC_SELECTORS_FROM_OPTIONS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "cc/selectors/interface.h"

namespace deepmind::reverb {

REVERB_EXPORT absl::StatusOr<std::unique_ptr<ItemSelector>> MakeSelector(
    const KeyDistributionOptions& options);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SELECTORS_FROM_OPTIONS_H_
