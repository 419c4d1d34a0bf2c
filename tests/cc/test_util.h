// Helpers shared by the C++ tests: building chunks and items, and a
// chi-square check for sampled frequencies.
#ifndef REVERB_TESTS_CC_TEST_UTIL_H_
#define REVERB_TESTS_CC_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "cc/core/chunk.h"
#include "cc/core/table_item.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb::testing {

// A chunk of `rows` steps of one float column, from episode `episode_id`.
inline ChunkData MakeChunkData(uint64_t key, uint64_t episode_id = 1,
                               int32_t rows = 1) {
  ChunkData chunk;
  chunk.set_chunk_key(key);
  chunk.mutable_sequence_range()->set_episode_id(episode_id);
  chunk.mutable_sequence_range()->set_start(0);
  chunk.mutable_sequence_range()->set_end(rows - 1);
  auto* tensor = chunk.mutable_data()->add_tensors();
  tensor->set_dtype(tensorflow::DT_FLOAT);
  tensor->mutable_tensor_shape()->add_dim()->set_size(rows);
  tensor->set_tensor_content(std::string(4 * rows, '\0'));
  chunk.set_data_tensors_len(1);
  chunk.set_data_uncompressed_size(4 * rows);
  return chunk;
}

inline std::shared_ptr<Chunk> MakeChunk(uint64_t key, uint64_t episode_id = 1,
                                        int32_t rows = 1) {
  return std::make_shared<Chunk>(MakeChunkData(key, episode_id, rows));
}

// An item whose single column reads the first row of each chunk in turn.
inline TableItem MakeItem(uint64_t key, double priority,
                          std::vector<std::shared_ptr<Chunk>> chunks) {
  TableItem item;
  item.item.set_key(key);
  item.item.set_table("table");
  item.item.set_priority(priority);
  auto* column = item.item.mutable_flat_trajectory()->add_columns();
  for (const auto& chunk : chunks) {
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(chunk->key());
    slice->set_offset(0);
    slice->set_length(1);
    slice->set_index(0);
  }
  item.chunks = std::move(chunks);
  return item;
}

// An item with a chunk of its own (chunk key = item key + 1'000'000).
inline TableItem MakeItem(uint64_t key, double priority = 1.0,
                          uint64_t episode_id = 1) {
  return MakeItem(key, priority, {MakeChunk(key + 1'000'000, episode_id)});
}

// Pearson's chi-square statistic of `counts` against `probabilities`.
inline double ChiSquare(const std::vector<int64_t>& counts,
                        const std::vector<double>& probabilities) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  double statistic = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probabilities[i] * total;
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return statistic;
}

// Critical value of the chi-square distribution with `df` degrees of freedom
// at a false-alarm probability of about 1e-6 (z = 4.75), by the
// Wilson-Hilferty approximation. A correct sampler fails a test using it
// about once in a million runs; a sampler off by a few percent on 10^5+
// draws fails every time.
inline double ChiSquareCritical(int df) {
  const double z = 4.75;
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

}  // namespace deepmind::reverb::testing

#endif  // REVERB_TESTS_CC_TEST_UTIL_H_
