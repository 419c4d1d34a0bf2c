// TableItem: what a table stores for one item, and SampledItem: what a
// sample hands out.
//
// An item is a PrioritizedItem proto (key, table, flat_trajectory,
// inserted_at) plus shared references to the chunks its trajectory reads,
// in the order the trajectory first mentions them. The table keeps the
// mutable priority and times_sampled next to it, so the item itself never
// changes after insertion and samples can share it without copying. For
// the same reason the table serializes it once, when it stores it: every
// sample sent over gRPC carries those bytes (sample_response.h), which spares
// a serialization of the item per sample for about its size in memory.
#ifndef REVERB_CC_CORE_TABLE_ITEM_H_
#define REVERB_CC_CORE_TABLE_ITEM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "cc/core/chunk.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

struct REVERB_EXPORT TableItem {
  PrioritizedItem item;
  std::vector<std::shared_ptr<Chunk>> chunks;
  // `item` serialized, as stored (times_sampled 0); set by the table when it
  // stores the item.
  std::string encoded_item;
};

struct REVERB_EXPORT SampledItem {
  // The item as inserted (and its encoded_item). Its `priority` and
  // `times_sampled` fields are those of insertion; the current values are
  // below.
  std::shared_ptr<const TableItem> ref;
  double probability = 0;
  int64_t table_size = 0;
  double priority = 0;
  int32_t times_sampled = 0;
  // True if the table had to wait for the rate limiter to serve the request.
  bool rate_limited = false;
};

// The distinct chunk keys of a trajectory, in order of first appearance.
// Inline: an item usually references a chunk or two per column.
using ChunkKeys = absl::InlinedVector<uint64_t, 4>;
REVERB_EXPORT ChunkKeys GetChunkKeys(const FlatTrajectory& trajectory);

// INVALID_ARGUMENT unless the trajectory has at least one column, every
// column at least one slice, every slice a positive length and non-negative
// offset inside its chunk, and `chunks` holds exactly the chunks of
// GetChunkKeys(trajectory), in that order.
REVERB_EXPORT absl::Status ValidateTableItem(const TableItem& item);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_TABLE_ITEM_H_
