#include "cc/chunk_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {

Chunk::Chunk(ChunkData data)
    : data_(std::move(data)), byte_size_(data_.ByteSizeLong()) {}

int64_t Chunk::uncompressed_data_size() const {
  return std::max<int64_t>(1, data_.data_uncompressed_size());
}

int32_t Chunk::num_rows() const {
  return data_.sequence_range().end() - data_.sequence_range().start() + 1;
}

int32_t Chunk::num_columns() const {
  return data_.data_tensors_len() > 0 ? data_.data_tensors_len()
                                      : data_.data().tensors_size();
}

std::shared_ptr<Chunk> ChunkStore::Insert(ChunkData data) {
  absl::MutexLock lock(&mu_);
  std::weak_ptr<Chunk>& entry = chunks_[data.chunk_key()];
  if (auto chunk = entry.lock()) return chunk;
  auto chunk = std::make_shared<Chunk>(std::move(data));
  entry = chunk;
  MaybeSweep();
  return chunk;
}

absl::Status ChunkStore::Get(absl::Span<const uint64_t> keys,
                             std::vector<std::shared_ptr<Chunk>>* chunks) {
  absl::MutexLock lock(&mu_);
  chunks->clear();
  chunks->reserve(keys.size());
  for (uint64_t key : keys) {
    auto it = chunks_.find(key);
    std::shared_ptr<Chunk> chunk;
    if (it != chunks_.end()) chunk = it->second.lock();
    if (chunk == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("Chunk ", key, " cannot be found."));
    }
    chunks->push_back(std::move(chunk));
  }
  return absl::OkStatus();
}

size_t ChunkStore::num_live_chunks() const {
  absl::MutexLock lock(&mu_);
  return std::count_if(chunks_.begin(), chunks_.end(),
                       [](const auto& entry) { return !entry.second.expired(); });
}

void ChunkStore::MaybeSweep() {
  if (chunks_.size() < sweep_threshold_) return;
  absl::erase_if(chunks_,
                 [](const auto& entry) { return entry.second.expired(); });
  sweep_threshold_ = std::max<size_t>(1024, 2 * chunks_.size());
}

}  // namespace deepmind::reverb
