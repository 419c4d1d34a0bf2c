#include "cc/core/table_item.h"

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace deepmind::reverb {
namespace {

// Up to this many chunk keys, an item's keys are searched by a scan (no
// allocation: the server does this for every item it inserts); beyond, a
// hash container holds them (an item of thousands of chunks stays linear).
constexpr size_t kMaxScannedKeys = 16;

}  // namespace

ChunkKeys GetChunkKeys(const FlatTrajectory& trajectory) {
  ChunkKeys keys;
  absl::flat_hash_set<uint64_t> seen;  // Only once there are many keys.
  for (const auto& column : trajectory.columns()) {
    for (const auto& slice : column.chunk_slices()) {
      const uint64_t key = slice.chunk_key();
      if (keys.size() < kMaxScannedKeys) {
        if (absl::c_linear_search(keys, key)) continue;
      } else {
        if (seen.empty()) seen.insert(keys.begin(), keys.end());
        if (!seen.insert(key).second) continue;
      }
      keys.push_back(key);
    }
  }
  return keys;
}

absl::Status ValidateTableItem(const TableItem& item) {
  const FlatTrajectory& trajectory = item.item.flat_trajectory();
  const uint64_t key = item.item.key();
  if (trajectory.columns_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Item ", key,
        " has an empty trajectory: it needs at least one column."));
  }
  // dm-reverb checks only the first column; an empty later column would make
  // every sample of the item fail.
  for (int i = 0; i < trajectory.columns_size(); ++i) {
    if (trajectory.columns(i).chunk_slices_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Item ", key, ": column ", i, " has no chunk slices."));
    }
  }
  const ChunkKeys keys = GetChunkKeys(trajectory);
  if (keys.size() != item.chunks.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Item ", key, " references ", keys.size(), " chunks but ",
                     item.chunks.size(), " were provided."));
  }
  absl::flat_hash_map<uint64_t, const Chunk*> by_key;  // Only for many.
  for (size_t i = 0; i < keys.size(); ++i) {
    if (item.chunks[i] == nullptr || item.chunks[i]->key() != keys[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Item ", key, ": chunk ", i, " should be chunk ", keys[i],
          " (the chunks must follow the order of the trajectory)."));
    }
    if (keys.size() > kMaxScannedKeys) by_key[keys[i]] = item.chunks[i].get();
  }
  // Every slice's key is one of `keys`.
  auto chunk_of = [&](uint64_t chunk_key) -> const Chunk& {
    if (!by_key.empty()) return *by_key.at(chunk_key);
    size_t i = 0;
    while (keys[i] != chunk_key) ++i;
    return *item.chunks[i];
  };
  for (const auto& column : trajectory.columns()) {
    for (const auto& slice : column.chunk_slices()) {
      const Chunk& chunk = chunk_of(slice.chunk_key());
      if (slice.offset() < 0 || slice.length() <= 0 ||
          static_cast<int64_t>(slice.offset()) + slice.length() >
              chunk.num_rows() ||
          slice.index() < 0 || slice.index() >= chunk.num_columns()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Item ", key, ": slice (offset=", slice.offset(),
            ", length=", slice.length(), ", index=", slice.index(),
            ") does not fit chunk ", chunk.key(), " of ", chunk.num_rows(),
            " rows and ", chunk.num_columns(), " columns."));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace deepmind::reverb
