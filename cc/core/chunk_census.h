// ChunkCensus: the distinct chunks a table's items reference, counted as
// items come and go, so that metrics read them without walking the table:
// how many chunks (by key), their serialized bytes and how many references
// items hold to them. A chunk's bytes are counted once however many items
// share it. Add and Remove cost one hash lookup per chunk of the item.
//
// Not thread-safe: its table calls it under the table's mutex.
#ifndef REVERB_CC_CORE_CHUNK_CENSUS_H_
#define REVERB_CC_CORE_CHUNK_CENSUS_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "cc/core/table_item.h"

namespace deepmind::reverb {

class ChunkCensus {
 public:
  // `item` entered the table.
  void Add(const TableItem& item);
  // `item`, added before, left the table.
  void Remove(const TableItem& item);
  void Clear();

  int64_t chunks() const { return static_cast<int64_t>(chunks_.size()); }
  int64_t bytes() const { return bytes_; }
  int64_t references() const { return references_; }

 private:
  struct Count {
    int64_t references;
    int64_t bytes;
  };
  absl::flat_hash_map<uint64_t, Count> chunks_;
  int64_t bytes_ = 0;
  int64_t references_ = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_CHUNK_CENSUS_H_
