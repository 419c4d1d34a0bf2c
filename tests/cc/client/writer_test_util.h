// Helpers shared by the tests of the insert stream and the two writers: a
// server on loopback, int32 tensors, and a table's items with their columns
// rebuilt from the chunks the table holds.
#ifndef REVERB_TESTS_CC_CLIENT_WRITER_TEST_UTIL_H_
#define REVERB_TESTS_CC_CLIENT_WRITER_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cc/client/sample.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/service/server.h"
#include "cc/tensor/tensor.h"

namespace deepmind::reverb::testing {

// A table that samples and removes oldest first.
inline std::shared_ptr<Table> FifoTable(const std::string& name,
                                        RateLimiter limiter,
                                        int64_t max_size = 1000) {
  return *Table::Create(name, std::make_unique<FifoSelector>(),
                        std::make_unique<FifoSelector>(), max_size,
                        /*max_times_sampled=*/0, std::move(limiter));
}

// A server on loopback; port 0 picks a free one.
inline absl::StatusOr<std::unique_ptr<Server>> StartServer(
    std::vector<std::shared_ptr<Table>> tables, int port = 0) {
  return Server::Start(std::move(tables), port, "localhost");
}

inline std::string Address(int port) {
  return "localhost:" + std::to_string(port);
}

inline Tensor Int32(std::vector<int32_t> values, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = tensorflow::DT_INT32;
  t.shape = std::move(shape);
  t.bytes.assign(reinterpret_cast<const char*>(values.data()),
                 values.size() * 4);
  return t;
}

inline std::vector<int32_t> Values(const Tensor& t) {
  std::vector<int32_t> values(t.bytes.size() / 4);
  std::memcpy(values.data(), t.bytes.data(), t.bytes.size());
  return values;
}

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
        stored.columns.push_back(Values(column));
      }
    }
    stored.item = std::move(item);
    items.push_back(std::move(stored));
  }
  return items;
}

// Polls `condition` until it holds or `timeout` passes; whether it held.
template <typename Condition>
bool WaitFor(Condition condition, absl::Duration timeout = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

}  // namespace deepmind::reverb::testing

#endif  // REVERB_TESTS_CC_CLIENT_WRITER_TEST_UTIL_H_
