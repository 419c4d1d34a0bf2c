// Microbenchmark of table operations: insert, sample and priority-update
// rates for Uniform and Prioritized tables at 10^3 and 10^6 items, with one
// and two client threads.
//
//   build/wheel/table_bench [--quick]
//
// Inserts are queued asynchronously (as the gRPC service does) and counted
// when confirmed; samples are taken in flexible batches of 256; updates go
// through MutateItems in batches of 1,000. All items share one chunk so that
// the figures are about the table, not about memory allocation.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"

namespace deepmind::reverb {
namespace {

constexpr int kSampleBatch = 256;
constexpr int kUpdateBatch = 1000;

std::shared_ptr<Chunk> SharedChunk() {
  ChunkData data;
  data.set_chunk_key(1);
  data.mutable_sequence_range()->set_episode_id(1);
  data.mutable_data()->add_tensors()->set_dtype(tensorflow::DT_FLOAT);
  data.set_data_tensors_len(1);
  return std::make_shared<Chunk>(std::move(data));
}

TableItem Item(uint64_t key, double priority,
               const std::shared_ptr<Chunk>& chunk) {
  TableItem item;
  item.item.set_key(key);
  item.item.set_priority(priority);
  auto* slice =
      item.item.mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(chunk->key());
  slice->set_length(1);
  item.chunks.push_back(chunk);
  return item;
}

std::shared_ptr<Table> MakeTable(bool prioritized, int64_t max_size) {
  std::unique_ptr<ItemSelector> sampler;
  if (prioritized) {
    sampler = std::make_unique<PrioritizedSelector>(0.8);
  } else {
    sampler = std::make_unique<UniformSelector>();
  }
  return *Table::Create("bench", std::move(sampler),
                        std::make_unique<FifoSelector>(), max_size, 0,
                        *MinSizeRateLimiter(1));
}

// Inserts keys [first, first + count) from `threads` threads; returns
// confirmed inserts per second.
double Insert(Table* table, uint64_t first, int64_t count, int threads,
              const std::shared_ptr<Chunk>& chunk) {
  absl::BlockingCounter confirmed(count);
  const absl::Time start = absl::Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int64_t i = t; i < count; i += threads) {
        table->InsertOrAssignAsync(
            Item(first + i, 1.0 + rng() % 100, chunk),
            [&](const absl::Status&) { confirmed.DecrementCount(); });
      }
    });
  }
  for (auto& w : workers) w.join();
  confirmed.Wait();
  return count / absl::ToDoubleSeconds(absl::Now() - start);
}

// Runs `op` (returning the number of operations it did) from `threads`
// threads for `duration`; returns operations per second.
template <typename Op>
double Rate(int threads, absl::Duration duration, Op op) {
  std::atomic<int64_t> total{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      int64_t done = 0;
      while (absl::Now() - start < duration) done += op(rng);
      total += done;
    });
  }
  for (auto& w : workers) w.join();
  return total / absl::ToDoubleSeconds(absl::Now() - start);
}

void Run(bool quick) {
  const absl::Duration duration = absl::Milliseconds(quick ? 200 : 1000);
  auto chunk = SharedChunk();
  std::printf("%-12s %9s %7s %14s %14s %14s\n", "selector", "items", "threads",
              "inserts/s", "samples/s", "updates/s");
  for (bool prioritized : {false, true}) {
    for (int64_t size : {int64_t{1000}, int64_t{1000000}}) {
      for (int threads : {1, 2}) {
        auto table = MakeTable(prioritized, size);
        const double inserts = Insert(table.get(), 0, size, threads, chunk);
        const double samples = Rate(threads, duration, [&](auto&) {
          auto batch = table->SampleFlexibleBatch(kSampleBatch);
          return batch.ok() ? static_cast<int64_t>(batch->size()) : 0;
        });
        std::vector<KeyWithPriority> updates(kUpdateBatch);
        const double update_rate = Rate(threads, duration, [&](auto& rng) {
          auto local = updates;
          for (auto& u : local) {
            u.set_key(rng() % size);
            u.set_priority(1.0 + rng() % 100);
          }
          return table->MutateItems(local, {}).ok() ? kUpdateBatch : 0;
        });
        std::printf("%-12s %9lld %7d %14.0f %14.0f %14.0f\n",
                    prioritized ? "Prioritized" : "Uniform",
                    static_cast<long long>(size), threads, inserts, samples,
                    update_rate);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace deepmind::reverb

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  deepmind::reverb::Run(quick);
  return 0;
}
