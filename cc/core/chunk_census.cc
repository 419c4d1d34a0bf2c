#include "cc/core/chunk_census.h"

namespace deepmind::reverb {

void ChunkCensus::Add(const TableItem& item) {
  for (const auto& chunk : item.chunks) {
    auto [it, inserted] = chunks_.try_emplace(
        chunk->key(),
        Count{0, static_cast<int64_t>(chunk->DataByteSizeLong())});
    if (inserted) bytes_ += it->second.bytes;
    ++it->second.references;
    ++references_;
  }
}

void ChunkCensus::Remove(const TableItem& item) {
  for (const auto& chunk : item.chunks) {
    auto it = chunks_.find(chunk->key());
    if (it == chunks_.end()) continue;
    --references_;
    if (--it->second.references == 0) {
      bytes_ -= it->second.bytes;
      chunks_.erase(it);
    }
  }
}

void ChunkCensus::Clear() {
  chunks_.clear();
  bytes_ = 0;
  references_ = 0;
}

}  // namespace deepmind::reverb
