// ItemSelector: the policy that picks which item a table samples (its
// "sampler") or evicts (its "remover").
//
// A selector only knows keys and priorities. The table owns the items and
// calls its selectors under its own mutex, so implementations need no
// locking and are not thread-safe.
//
// Every call that can be caused by user input returns a status:
// Insert of an existing key, Update or Delete of a missing key and
// priorities a selector cannot use (NaN or negative for Prioritized) give
// INVALID_ARGUMENT and leave the selector unchanged.
#ifndef REVERB_CC_SELECTORS_INTERFACE_H_
#define REVERB_CC_SELECTORS_INTERFACE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

using Key = uint64_t;

class REVERB_EXPORT ItemSelector {
 public:
  struct KeyWithProbability {
    Key key;
    // Probability with which `key` was chosen: 1/size for Uniform, w/sum(w)
    // for Prioritized and 1.0 for the deterministic selectors.
    double probability;
  };

  virtual ~ItemSelector() = default;

  // Adds `key`. Error if the key is already present.
  virtual absl::Status Insert(Key key, double priority) = 0;

  // Changes the priority of `key`. Error if the key is not present.
  virtual absl::Status Update(Key key, double priority) = 0;

  // Update(keys[i], priorities[i]) for each i, in order, into statuses[i]
  // (the three spans have one length). A selector may serve the batch
  // faster than one key at a time (Prioritized, in a large table).
  virtual void UpdateMany(absl::Span<const Key> keys,
                          absl::Span<const double> priorities,
                          absl::Span<absl::Status> statuses) {
    for (size_t i = 0; i < keys.size(); ++i) {
      statuses[i] = Update(keys[i], priorities[i]);
    }
  }

  // Removes `key`. Error if the key is not present.
  virtual absl::Status Delete(Key key) = 0;

  // Picks a key. Precondition: the selector holds at least one key.
  virtual KeyWithProbability Sample() = 0;

  // Removes all keys.
  virtual void Clear() = 0;

  // Number of keys held.
  virtual int64_t size() const = 0;

  // Whether priorities change what this selector does (false for Fifo, Lifo
  // and Uniform, whose Update of a present key does nothing): the table then
  // skips it when priorities change.
  virtual bool uses_priorities() const { return true; }

  // The sum of the weights Sample() draws by, for a selector that draws by
  // weight (Prioritized); 0 for the others.
  virtual double weight_sum() const { return 0; }

  // The configuration, as stored in TableInfo and checkpoints.
  virtual KeyDistributionOptions options() const = 0;

  virtual std::string DebugString() const = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SELECTORS_INTERFACE_H_
