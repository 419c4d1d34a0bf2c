#include "cc/core/insert_session.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {

absl::Status InsertSession::Process(std::vector<std::shared_ptr<Chunk>> chunks,
                                    absl::Span<PrioritizedItem> items,
                                    absl::Span<const uint64_t> keep_chunk_keys,
                                    Insert insert) {
  if (chunks.empty() && items.empty()) {
    return absl::InvalidArgumentError(
        "InsertStreamRequest has neither chunks nor items.");
  }
  for (std::shared_ptr<Chunk>& chunk : chunks) {
    if (chunks_.contains(chunk->key())) continue;
    if (held_bytes_ != nullptr) {
      REVERB_RETURN_IF_ERROR(
          held_bytes_->Add(static_cast<int64_t>(chunk->DataByteSizeLong())));
    }
    chunks_.emplace(chunk->key(), std::move(chunk));
  }
  if (items.empty()) return absl::OkStatus();

  for (PrioritizedItem& item : items) {
    auto table = find_table_(item.table());
    if (!table.ok()) return table.status();
    TableItem table_item;
    const ChunkKeys keys = GetChunkKeys(item.flat_trajectory());
    table_item.chunks.reserve(keys.size());
    for (uint64_t key : keys) {
      auto it = chunks_.find(key);
      if (it == chunks_.end()) {
        return absl::InternalError(absl::StrCat(
            "Could not find sequence chunk ", key, " for item ", item.key(),
            ": it was not sent on this stream or not kept."));
      }
      table_item.chunks.push_back(it->second);
    }
    table_item.item = std::move(item);
    REVERB_RETURN_IF_ERROR(insert(*table, std::move(table_item)));
  }

  absl::flat_hash_set<uint64_t> keep(keep_chunk_keys.begin(),
                                     keep_chunk_keys.end());
  absl::erase_if(chunks_, [this, &keep](const auto& entry) {
    if (keep.contains(entry.first)) return false;
    if (held_bytes_ != nullptr) {
      held_bytes_->Release(
          static_cast<int64_t>(entry.second->DataByteSizeLong()));
    }
    return true;
  });
  if (chunks_.size() != keep.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Kept less chunks than expected: ", keep.size(),
                     " keep_chunk_keys but only ", chunks_.size(),
                     " of them were sent on this stream."));
  }
  return absl::OkStatus();
}

void InsertSession::Clear() {
  chunks_.clear();
  if (held_bytes_ != nullptr) held_bytes_->ReleaseAll();
}

}  // namespace deepmind::reverb
