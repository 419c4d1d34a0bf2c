// Helpers shared by the C++ tests: building tensors, chunks and items,
// polling for a condition, and a chi-square check for sampled frequencies.
#ifndef REVERB_TESTS_CC_TEST_UTIL_H_
#define REVERB_TESTS_CC_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cc/core/chunk.h"
#include "cc/core/table_item.h"
#include "cc/tensor/compression.h"
#include "cc/tensor/tensor.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb::testing {

// `bytes` as a cord of pieces of `piece` bytes that reference it (as gRPC
// hands over what it received), so that readers meet piece boundaries; absl
// copies pieces shorter than 512 bytes into their neighbours. `bytes` must
// outlive the cord.
inline absl::Cord InPieces(absl::string_view bytes, size_t piece) {
  absl::Cord cord;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    cord.Append(absl::MakeCordFromExternal(bytes.substr(at, piece), [] {}));
  }
  return cord;
}

// `size` pseudo-random (incompressible) bytes, the same for the same `seed`.
inline std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

// A numeric tensor holding `values`, row-major.
template <typename T>
Tensor MakeTensor(tensorflow::DataType dtype, std::vector<int64_t> shape,
                  const std::vector<T>& values) {
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes.assign(reinterpret_cast<const char*>(values.data()),
                      values.size() * sizeof(T));
  return tensor;
}

// The elements of a numeric tensor, as T.
template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  std::vector<T> values(tensor.bytes.size() / sizeof(T));
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

// An int32 tensor holding `values`, row-major.
inline Tensor Int32(const std::vector<int32_t>& values,
                    std::vector<int64_t> shape) {
  return MakeTensor<int32_t>(tensorflow::DT_INT32, std::move(shape), values);
}

inline Tensor MakeStrings(std::vector<int64_t> shape,
                          std::vector<std::string> values) {
  Tensor tensor;
  tensor.dtype = tensorflow::DT_STRING;
  tensor.shape = std::move(shape);
  tensor.strings = std::move(values);
  return tensor;
}

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

// An item of `table`, as a writer sends it, that reads row 0 of chunk
// `chunk_key`.
inline PrioritizedItem MakePrioritizedItem(uint64_t key,
                                           const std::string& table,
                                           uint64_t chunk_key,
                                           double priority = 1) {
  PrioritizedItem item;
  item.set_key(key);
  item.set_table(table);
  item.set_priority(priority);
  auto* slice =
      item.mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(chunk_key);
  slice->set_offset(0);
  slice->set_length(1);
  slice->set_index(0);
  return item;
}

// An item with a chunk of its own (chunk key = item key + 1'000'000).
inline TableItem MakeItem(uint64_t key, double priority = 1.0,
                          uint64_t episode_id = 1) {
  return MakeItem(key, priority, {MakeChunk(key + 1'000'000, episode_id)});
}

// A chunk of one step whose single column is the int32 scalar `value`,
// compressed as a writer sends it (so that, unlike MakeChunk's, a sampler
// can unpack it): the step reads back as a tensor of shape [1].
inline std::shared_ptr<Chunk> MakeInt32Chunk(uint64_t key, int32_t value) {
  ChunkData chunk;
  chunk.set_chunk_key(key);
  chunk.mutable_sequence_range()->set_episode_id(1);
  chunk.mutable_sequence_range()->set_start(0);
  chunk.mutable_sequence_range()->set_end(0);
  const Tensor step = MakeTensor<int32_t>(tensorflow::DT_INT32, {1}, {value});
  // A valid tensor: cannot fail.
  CompressTensorAsProto(step, chunk.mutable_data()->add_tensors())
      .IgnoreError();
  chunk.set_data_tensors_len(1);
  chunk.set_data_uncompressed_size(4);
  return std::make_shared<Chunk>(chunk);
}

// An item over a MakeInt32Chunk of its own (chunk key = item key +
// 1'000'000).
inline TableItem MakeInt32Item(uint64_t key, double priority, int32_t value) {
  return MakeItem(key, priority, {MakeInt32Chunk(key + 1'000'000, value)});
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
