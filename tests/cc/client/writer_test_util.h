// Helpers shared by the tests of the insert stream and the two writers: the
// timeout text and a table's items with their columns rebuilt from the
// chunks the table holds. Includes the server and tensor helpers they use.
#ifndef REVERB_TESTS_CC_CLIENT_WRITER_TEST_UTIL_H_
#define REVERB_TESTS_CC_CLIENT_WRITER_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cc/client/sample.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/tensor/tensor.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb::testing {

// What Flush/Close/EndEpisode report when their timeout passes with one item
// sent and not yet confirmed.
inline constexpr char kOneAwaitingConfirmation[] =
    "Timeout exceeded with 0 items waiting to be written and 1 items "
    "awaiting confirmation.";

// An item as its table holds it.
struct StoredItem {
  PrioritizedItem item;                       // With its current priority.
  std::vector<uint64_t> chunk_keys;           // GetChunkKeys of its trajectory.
  std::vector<ChunkData> chunks;              // Those chunks, in that order.
  std::vector<std::vector<int32_t>> columns;  // Rebuilt from the chunks.
};

// The items of `table` in insertion order. Columns that cannot be rebuilt
// are left empty (and the test comparing them fails).
inline std::vector<StoredItem> StoredItems(const Table& table) {
  Table::CheckpointData data = table.Checkpoint();
  std::map<uint64_t, ChunkData> chunks;  // Stable addresses.
  for (const auto& chunk : data.chunks) chunks[chunk->key()] = chunk->ToProto();
  std::vector<StoredItem> items;
  for (PrioritizedItem& item : data.items) {
    StoredItem stored;
    std::vector<const ChunkData*> referenced;
    for (uint64_t key : GetChunkKeys(item.flat_trajectory())) {
      stored.chunk_keys.push_back(key);
      stored.chunks.push_back(chunks[key]);
      referenced.push_back(&chunks[key]);
    }
    auto info = std::make_shared<SampleInfo>();
    *info->mutable_item() = item;
    auto sample = UnpackSample(std::move(info), referenced);
    if (sample.ok()) {
      for (const Tensor& column : sample->columns) {
        stored.columns.push_back(Values<int32_t>(column));
      }
    }
    stored.item = std::move(item);
    items.push_back(std::move(stored));
  }
  return items;
}

}  // namespace deepmind::reverb::testing

#endif  // REVERB_TESTS_CC_CLIENT_WRITER_TEST_UTIL_H_
