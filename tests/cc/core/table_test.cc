#include "cc/core/table.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "cc/core/errors.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/heap.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"
#include "cc/support/mutex.h"
#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::MakeChunk;
using testing::MakeItem;

constexpr absl::Duration kTimeout = absl::Seconds(30);

std::shared_ptr<Table> MakeTable(
    std::unique_ptr<ItemSelector> sampler,
    std::unique_ptr<ItemSelector> remover, int64_t max_size = 100,
    int32_t max_times_sampled = 0,
    absl::StatusOr<RateLimiter> limiter = MinSizeRateLimiter(1)) {
  auto table = Table::Create("table", std::move(sampler), std::move(remover),
                             max_size, max_times_sampled, *limiter);
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

std::shared_ptr<Table> MakeUniformTable(int64_t max_size = 100,
                                        int32_t max_times_sampled = 0) {
  return MakeTable(std::make_unique<UniformSelector>(),
                   std::make_unique<FifoSelector>(), max_size,
                   max_times_sampled);
}

std::vector<uint64_t> Keys(const std::vector<SampledItem>& items) {
  std::vector<uint64_t> keys;
  for (const auto& item : items) keys.push_back(item.ref->item.key());
  return keys;
}

TEST(TableTest, CreateValidatesArguments) {
  auto limiter = *MinSizeRateLimiter(1);
  EXPECT_EQ(Table::Create("", std::make_unique<FifoSelector>(),
                          std::make_unique<FifoSelector>(), 10, 0, limiter)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Table::Create("t", std::make_unique<FifoSelector>(),
                          std::make_unique<FifoSelector>(), 0, 0, limiter)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Table::Create("t", nullptr, std::make_unique<FifoSelector>(), 1, 0,
                          limiter)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TableTest, SampleReturnsItemWithInfo) {
  auto table = MakeUniformTable();
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 2.5)).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(2, 3.5)).ok());
  auto sample = table->Sample(kTimeout);
  ASSERT_TRUE(sample.ok()) << sample.status();
  const uint64_t key = sample->ref->item.key();
  EXPECT_DOUBLE_EQ(sample->probability, 0.5);
  EXPECT_EQ(sample->table_size, 2);
  EXPECT_DOUBLE_EQ(sample->priority, key == 1 ? 2.5 : 3.5);
  EXPECT_EQ(sample->times_sampled, 1);
  EXPECT_TRUE(sample->ref->item.has_inserted_at());
  EXPECT_EQ(table->Get(key)->times_sampled(), 1);
  // Responses carry the item as the table encoded it when it stored it.
  PrioritizedItem encoded;
  ASSERT_TRUE(encoded.ParseFromString(sample->ref->encoded_item));
  EXPECT_EQ(encoded.SerializeAsString(), sample->ref->item.SerializeAsString());
  EXPECT_EQ(encoded.key(), key);
  EXPECT_EQ(encoded.times_sampled(), 0);
}

TEST(TableTest, InsertOfExistingKeyOnlyUpdatesPriority) {
  auto table = MakeUniformTable();
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0)).ok());
  auto chunk = MakeChunk(77);
  std::weak_ptr<Chunk> weak = chunk;
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 9.0, {std::move(chunk)})).ok());
  EXPECT_EQ(table->size(), 1);
  EXPECT_DOUBLE_EQ(table->Get(1)->priority(), 9.0);
  // The trajectory is the original one and the new chunk was dropped.
  EXPECT_EQ(
      table->Get(1)->flat_trajectory().columns(0).chunk_slices(0).chunk_key(),
      1'000'001u);
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(table->info().rate_limiter_info().insert_stats().completed(), 1);
}

TEST(TableTest, FullTableEvictsTheRemoversPick) {
  auto table = MakeUniformTable(/*max_size=*/3);
  for (uint64_t key = 1; key <= 5; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key)).ok());
  }
  EXPECT_EQ(table->size(), 3);
  EXPECT_FALSE(table->Get(1).ok());
  EXPECT_FALSE(table->Get(2).ok());
  EXPECT_TRUE(table->Get(5).ok());
  auto info = table->info().rate_limiter_info();
  EXPECT_EQ(info.insert_stats().completed(), 5);
}

TEST(TableTest, LifoRemoverEvictsTheNewItemItself) {
  auto table = MakeTable(std::make_unique<UniformSelector>(),
                         std::make_unique<LifoSelector>(), /*max_size=*/2);
  for (uint64_t key = 1; key <= 3; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key)).ok());
  }
  EXPECT_TRUE(table->Get(1).ok());
  EXPECT_TRUE(table->Get(2).ok());
  EXPECT_FALSE(table->Get(3).ok());
}

TEST(TableTest, ItemIsDeletedAfterMaxTimesSampled) {
  auto table = MakeTable(std::make_unique<FifoSelector>(),
                         std::make_unique<FifoSelector>(), 10,
                         /*max_times_sampled=*/2);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(2)).ok());
  auto batch = table->SampleFlexibleBatch(3, kTimeout);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(Keys(*batch), (std::vector<uint64_t>{1, 1, 2}));
  EXPECT_EQ((*batch)[1].times_sampled, 2);
  // table_size is the size before the deletion the sample caused.
  EXPECT_EQ((*batch)[1].table_size, 2);
  EXPECT_EQ((*batch)[2].table_size, 1);
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(table->info().num_unique_samples(), 2);
}

TEST(TableTest, SampledFrequenciesFollowThePriorities) {
  // Batches draw picks ahead of use; the frequencies must still be exactly
  // those of the selector.
  auto table = MakeTable(std::make_unique<PrioritizedSelector>(1.0),
                         std::make_unique<FifoSelector>());
  std::vector<double> probabilities;
  for (uint64_t key = 0; key < 5; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key, key + 1.0)).ok());
    probabilities.push_back((key + 1.0) / 15);
  }
  std::vector<int64_t> counts(5);
  for (int i = 0; i < 1000; ++i) {
    auto batch = table->SampleFlexibleBatch(300, kTimeout);
    ASSERT_TRUE(batch.ok());
    ASSERT_EQ(batch->size(), 300u);
    for (const auto& item : *batch) {
      ++counts[item.ref->item.key()];
      EXPECT_DOUBLE_EQ(item.probability, probabilities[item.ref->item.key()]);
    }
  }
  EXPECT_LT(testing::ChiSquare(counts, probabilities),
            testing::ChiSquareCritical(4));
}

TEST(TableTest, InfoReportsPriorityMassAndWhetherSamplesAreBlocked) {
  auto table = MakeTable(std::make_unique<PrioritizedSelector>(2.0),
                         std::make_unique<FifoSelector>(), 100, 0,
                         MinSizeRateLimiter(2));
  EXPECT_EQ(table->info().priority_mass(), 0);
  EXPECT_TRUE(table->info().samples_blocked());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 3.0)).ok());
  EXPECT_DOUBLE_EQ(table->info().priority_mass(), 9.0);
  EXPECT_TRUE(table->info().samples_blocked());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(2, 0.5)).ok());
  EXPECT_DOUBLE_EQ(table->info().priority_mass(), 9.25);
  EXPECT_FALSE(table->info().samples_blocked());
  // Only a Prioritized sampler has a mass.
  auto uniform = MakeUniformTable();
  ASSERT_TRUE(uniform->InsertOrAssign(MakeItem(1, 3.0)).ok());
  EXPECT_EQ(uniform->info().priority_mass(), 0);
  EXPECT_FALSE(uniform->info().samples_blocked());
}

TEST(TableTest, ACancelledSampleRequestTakesNothing) {
  // A queue: an item sampled is gone.
  auto table = MakeTable(std::make_unique<FifoSelector>(),
                         std::make_unique<FifoSelector>(), 10,
                         /*max_times_sampled=*/1);
  auto cancellation = std::make_shared<std::atomic<bool>>(false);
  absl::Notification answered;
  absl::StatusOr<std::vector<SampledItem>> result;
  table->SampleAsync(
      1, absl::InfiniteFuture(),
      [&](absl::StatusOr<std::vector<SampledItem>> items) {
        result = std::move(items);
        answered.Notify();
      },
      cancellation);
  table->Cancel(cancellation);
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_TRUE(absl::IsCancelled(result.status())) << result.status();
  // The item that comes next stays for the next request.
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
  EXPECT_EQ(table->size(), 1);
  auto sample = table->Sample(kTimeout);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->ref->item.key(), 1);
}

TEST(TableTest, ACancelledInsertIsNeverDone) {
  // One item in, then one more per sample.
  auto table = MakeTable(std::make_unique<FifoSelector>(),
                         std::make_unique<FifoSelector>(), 10,
                         /*max_times_sampled=*/1, QueueRateLimiter(1));
  auto cancellation = std::make_shared<std::atomic<bool>>(false);
  std::vector<absl::Status> statuses(3);
  std::vector<absl::Notification> done(3);
  for (int i = 0; i < 3; ++i) {
    table->InsertOrAssignAsync(
        MakeItem(i + 1),
        [&, i](const absl::Status& status) {
          statuses[i] = status;
          done[i].Notify();
        },
        cancellation);
  }
  ASSERT_TRUE(done[0].WaitForNotificationWithTimeout(kTimeout));
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  // Items 2 and 3 wait for the rate limiter.
  table->Cancel(cancellation);
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(done[i].WaitForNotificationWithTimeout(kTimeout));
    EXPECT_TRUE(absl::IsCancelled(statuses[i])) << statuses[i];
  }
  // The rate limiter lets one more in: the next insert, not a cancelled one.
  auto sample = table->Sample(kTimeout);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->ref->item.key(), 1);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(4), kTimeout).ok());
  EXPECT_EQ(table->size(), 1);
  EXPECT_TRUE(table->Get(4).ok());
  // An insert made with it afterwards is withdrawn too, even with room.
  ASSERT_TRUE(table->Sample(kTimeout).ok());
  absl::Status late;
  absl::Notification late_done;
  table->InsertOrAssignAsync(
      MakeItem(5),
      [&](const absl::Status& status) {
        late = status;
        late_done.Notify();
      },
      cancellation);
  ASSERT_TRUE(late_done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_TRUE(absl::IsCancelled(late)) << late;
  EXPECT_EQ(table->size(), 0);
  EXPECT_TRUE(table->InsertOrAssign(MakeItem(6), kTimeout).ok());
}

TEST(TableTest, SampleWaitsForMinSize) {
  auto table =
      MakeTable(std::make_unique<UniformSelector>(),
                std::make_unique<FifoSelector>(), 10, 0, MinSizeRateLimiter(2));
  absl::Notification sampled;
  absl::StatusOr<SampledItem> result;
  std::thread sampler([&] {
    result = table->Sample(kTimeout);
    sampled.Notify();
  });
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
  EXPECT_FALSE(sampled.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(2)).ok());
  sampler.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->rate_limited);
}

// An insert that the table makes on the caller's thread wakes the worker
// only when it holds sample requests; one that arrives while it takes them
// in must not be missed. The gaps vary where the request meets the insert;
// a missed wake-up would leave the sample waiting for kTimeout.
TEST(TableTest, InsertOnCallersThreadWakesAWaitingSampler) {
  for (int round = 0; round < 300; ++round) {
    auto table = MakeUniformTable();
    absl::StatusOr<SampledItem> result;
    std::thread sampler([&] { result = table->Sample(kTimeout); });
    absl::SleepFor(absl::Microseconds(round % 30 * 10));
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
    sampler.join();
    ASSERT_TRUE(result.ok()) << "round " << round << ": " << result.status();
  }
}

// Thread names of this process, from /proc (Linux).
std::vector<std::string> ThreadNames() {
  std::vector<std::string> names;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  return names;
}

TEST(TableTest, WorkerThreadIsNamed) {
  auto table = MakeUniformTable();
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());  // Worker running.
  std::vector<std::string> names = ThreadNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "reverb-table"), names.end());
}

TEST(TableTest, WorkerTimeCountsWaitingForInserts) {
  auto table = MakeUniformTable();
  std::thread sampler([&] { ASSERT_TRUE(table->Sample(kTimeout).ok()); });
  // The sample request waits for this insert for (at least) 200 ms.
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
  sampler.join();
  TableWorkerTime time = table->info().table_worker_time();
  EXPECT_GE(time.waiting_for_inserts_ms(), 100);
  EXPECT_LE(
      time.waiting_for_inserts_ms() + time.sleeping_ms() + time.running_ms(),
      absl::ToInt64Milliseconds(kTimeout));
}

TEST(TableTest, SampleTimesOutWithRateLimiterTimeout) {
  auto table = MakeUniformTable();
  auto result = table->Sample(absl::Milliseconds(20));
  EXPECT_TRUE(IsRateLimiterTimeout(result.status())) << result.status();
}

TEST(TableTest, FlexibleBatchReturnsWhatIsAvailable) {
  auto table = MakeTable(std::make_unique<FifoSelector>(),
                         std::make_unique<FifoSelector>(), 10,
                         /*max_times_sampled=*/1);
  for (uint64_t key = 1; key <= 3; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key)).ok());
  }
  auto batch = table->SampleFlexibleBatch(10, kTimeout);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(Keys(*batch), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_FALSE((*batch)[0].rate_limited);
}

TEST(TableTest, BatchIsClosedAtFourMebibytesOfChunks) {
  auto table = MakeUniformTable();
  // Each chunk holds 1M floats (4 MB).
  ASSERT_TRUE(
      table->InsertOrAssign(MakeItem(1, 1.0, {MakeChunk(10, 1, 1'000'000)}))
          .ok());
  auto batch = table->SampleFlexibleBatch(10, kTimeout);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->size(), 2u);
}

TEST(TableTest, ARequestMayBoundItsBatchBytesItself) {
  auto table = MakeUniformTable();
  ASSERT_TRUE(
      table->InsertOrAssign(MakeItem(1, 1.0, {MakeChunk(10, 1, 150'000)}))
          .ok());
  // No bound: the whole batch; a bound below one item: that item.
  for (auto [max_bytes, expected] :
       {std::pair<int64_t, size_t>{std::numeric_limits<int64_t>::max(), 10},
        {1, 1}}) {
    SCOPED_TRACE(max_bytes);
    // Shared with the callback, which may still be returning from Notify()
    // when the wait below ends. (The Notification is cc/support/mutex.h's,
    // whose order ThreadSanitizer sees; it does not see into abseil's.)
    struct Answer {
      Notification answered;
      absl::StatusOr<std::vector<SampledItem>> batch;
    };
    auto answer = std::make_shared<Answer>();
    table->SampleAsync(
        10, absl::Now() + kTimeout,
        [answer](absl::StatusOr<std::vector<SampledItem>> items) {
          answer->batch = std::move(items);
          answer->answered.Notify();
        },
        nullptr, max_bytes);
    ASSERT_TRUE(answer->answered.WaitForNotificationWithTimeout(kTimeout));
    ASSERT_TRUE(answer->batch.ok()) << answer->batch.status();
    EXPECT_EQ(answer->batch->size(), expected);
  }
}

TEST(TableTest, BlockedInsertTimesOutButStaysQueued) {
  auto table =
      MakeTable(std::make_unique<FifoSelector>(),
                std::make_unique<FifoSelector>(), 10, 1, QueueRateLimiter(1));
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
  EXPECT_FALSE(table->CanInsert(1));
  absl::Status status =
      table->InsertOrAssign(MakeItem(2), absl::Milliseconds(20));
  EXPECT_TRUE(IsRateLimiterTimeout(status)) << status;
  EXPECT_FALSE(table->Get(2).ok());
  auto first = table->Sample(kTimeout);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->ref->item.key(), 1u);
  auto second = table->Sample(kTimeout);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->ref->item.key(), 2u);
}

TEST(TableTest, InsertsAndSamplesAlternateUnderAQueue) {
  auto table =
      MakeTable(std::make_unique<FifoSelector>(),
                std::make_unique<FifoSelector>(), 10, 1, QueueRateLimiter(2));
  std::vector<uint64_t> sampled;
  std::thread consumer([&] {
    for (int i = 0; i < 50; ++i) {
      auto item = table->Sample(kTimeout);
      ASSERT_TRUE(item.ok()) << item.status();
      sampled.push_back(item->ref->item.key());
    }
  });
  for (uint64_t key = 0; key < 50; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key), kTimeout).ok());
  }
  consumer.join();
  for (uint64_t key = 0; key < 50; ++key) EXPECT_EQ(sampled[key], key);
}

TEST(TableTest, MutateItemsDeletesThenUpdates) {
  auto table = MakeTable(std::make_unique<HeapSelector>(true),
                         std::make_unique<FifoSelector>());
  for (uint64_t key = 1; key <= 3; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key, key)).ok());
  }
  std::vector<KeyWithPriority> updates(3);
  updates[0].set_key(1);  // Deleted first, so this update is ignored.
  updates[0].set_priority(-5);
  updates[1].set_key(3);
  updates[1].set_priority(0);
  updates[2].set_key(99);  // Unknown: ignored.
  updates[2].set_priority(0);
  ASSERT_TRUE(table->MutateItems(updates, {1, 42}).ok());
  EXPECT_EQ(table->size(), 2);
  EXPECT_FALSE(table->Get(1).ok());
  EXPECT_EQ(table->Sample(kTimeout)->ref->item.key(), 3u);
  EXPECT_EQ(table->info().rate_limiter_info().insert_stats().completed(), 3);
}

TEST(TableTest, MutateItemsTakesParallelArrays) {
  auto table = MakeTable(std::make_unique<PrioritizedSelector>(1.0),
                         std::make_unique<FifoSelector>());
  for (uint64_t key = 1; key <= 4; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key, 1.0)).ok());
  }
  // Key 2 twice (the later priority stays), 99 unknown, 4 deleted first.
  const std::vector<uint64_t> keys = {2, 3, 99, 2, 4};
  const std::vector<double> priorities = {7, 3, 5, 6, 8};
  ASSERT_TRUE(table->MutateItems(keys, priorities, {4}).ok());
  EXPECT_DOUBLE_EQ(table->Get(1)->priority(), 1.0);
  EXPECT_DOUBLE_EQ(table->Get(2)->priority(), 6.0);
  EXPECT_DOUBLE_EQ(table->Get(3)->priority(), 3.0);
  EXPECT_FALSE(table->Get(4).ok());
  // The sampler's weights follow: 6 of a total of 1 + 6 + 3.
  int twos = 0;
  constexpr int kDraws = 4000;
  for (int i = 0; i < kDraws; ++i) {
    auto item = table->Sample(kTimeout);
    ASSERT_TRUE(item.ok());
    if (item->ref->item.key() == 2) {
      EXPECT_DOUBLE_EQ(item->probability, 0.6);
      ++twos;
    }
  }
  // Binomial(4000, 0.6): sd 31, so +-200 is over 6 sd.
  EXPECT_NEAR(twos, 0.6 * kDraws, 200);
}

TEST(TableTest, MutateItemsOfMismatchedArraysChangesNothing) {
  auto table = MakeUniformTable();
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0)).ok());
  const std::vector<uint64_t> keys = {1, 1};
  const std::vector<double> priorities = {5};
  EXPECT_EQ(table->MutateItems(keys, priorities, {1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(table->Get(1)->priority(), 1.0);
}

// A Fifo selector that counts the updates it is asked for.
class CountingFifo : public FifoSelector {
 public:
  explicit CountingFifo(int* updates) : updates_(updates) {}
  absl::Status Update(Key key, double priority) override {
    ++*updates_;
    return FifoSelector::Update(key, priority);
  }

 private:
  int* updates_;
};

TEST(TableTest, SelectorsThatIgnorePrioritiesAreNotAskedToUpdate) {
  int sampler_updates = 0;
  int remover_updates = 0;
  auto table = MakeTable(std::make_unique<CountingFifo>(&sampler_updates),
                         std::make_unique<CountingFifo>(&remover_updates));
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0)).ok());
  const std::vector<uint64_t> keys = {1};
  const std::vector<double> priorities = {std::nan("")};
  // Nothing rejects NaN here (as in dm-reverb); the item keeps it.
  ASSERT_TRUE(table->MutateItems(keys, priorities, {}).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 2.0)).ok());
  EXPECT_EQ(sampler_updates, 0);
  EXPECT_EQ(remover_updates, 0);
  EXPECT_DOUBLE_EQ(table->Get(1)->priority(), 2.0);
  EXPECT_EQ(table->Sample(kTimeout)->ref->item.key(), 1u);
}

TEST(TableTest, BadPriorityFailsOnlyItsOwnRequest) {
  auto table = MakeTable(std::make_unique<PrioritizedSelector>(1.0),
                         std::make_unique<FifoSelector>());
  EXPECT_EQ(table->InsertOrAssign(MakeItem(1, -1.0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->InsertOrAssign(MakeItem(2, std::nan(""))).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->size(), 0);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(3, 1.0)).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(4, 1.0)).ok());

  std::vector<KeyWithPriority> updates(2);
  updates[0].set_key(3);
  updates[0].set_priority(-2);
  updates[1].set_key(4);
  updates[1].set_priority(0);
  EXPECT_EQ(table->MutateItems(updates, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(table->Get(3)->priority(), 1.0);
  EXPECT_DOUBLE_EQ(table->Get(4)->priority(), 0.0);
  // The table still serves: only key 3 has weight.
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(table->Sample(kTimeout)->ref->item.key(), 3u);
  }
  EXPECT_EQ(table->info().rate_limiter_info().insert_stats().completed(), 2);
}

TEST(TableTest, InvalidItemIsRejectedAtOnce) {
  auto table = MakeUniformTable();
  TableItem item = MakeItem(1);
  item.chunks.clear();
  EXPECT_EQ(table->InsertOrAssign(std::move(item)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->size(), 0);
}

TEST(TableTest, ResetClearsItemsAndCountersButKeepsQueuedInserts) {
  auto table =
      MakeTable(std::make_unique<FifoSelector>(),
                std::make_unique<FifoSelector>(), 10, 1, QueueRateLimiter(1));
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, 7)).ok());
  absl::Notification inserted;
  table->InsertOrAssignAsync(MakeItem(2),
                             [&](const absl::Status& s) { inserted.Notify(); });
  EXPECT_FALSE(inserted.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  table->Reset();
  inserted.WaitForNotification();
  EXPECT_FALSE(table->Get(1).ok());
  EXPECT_TRUE(table->Get(2).ok());
  TableInfo info = table->info();
  EXPECT_EQ(info.current_size(), 1);
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(), 1);
  EXPECT_EQ(info.num_deleted_episodes(), 0);
}

TEST(TableTest, CloseCancelsWaitersAndLaterRequests) {
  auto table = MakeUniformTable();
  absl::StatusOr<SampledItem> result;
  std::thread sampler([&] { result = table->Sample(kTimeout); });
  absl::SleepFor(absl::Milliseconds(20));
  table->Close();
  sampler.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(table->InsertOrAssign(MakeItem(1)).code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(table->Sample(kTimeout).status().code(),
            absl::StatusCode::kCancelled);
  table->Close();  // Idempotent.
}

TEST(TableTest, EpisodeCounters) {
  auto table = MakeUniformTable();
  auto episode_a = MakeChunk(10, /*episode_id=*/100);
  auto episode_b = MakeChunk(11, /*episode_id=*/200);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, {episode_a})).ok());
  ASSERT_TRUE(
      table->InsertOrAssign(MakeItem(2, 1.0, {episode_a, episode_b})).ok());
  EXPECT_EQ(table->info().num_episodes(), 2);
  ASSERT_TRUE(table->MutateItems({}, {2}).ok());
  TableInfo info = table->info();
  EXPECT_EQ(info.num_episodes(), 1);
  EXPECT_EQ(info.num_deleted_episodes(), 1);
  ASSERT_TRUE(table->MutateItems({}, {1}).ok());
  EXPECT_EQ(table->info().num_episodes(), 0);
  EXPECT_EQ(table->info().num_deleted_episodes(), 2);
}

TEST(TableTest, ChunkIsFreedWhenTheLastItemInAnyTableLetsGo) {
  auto fifo = MakeUniformTable();
  auto other = MakeUniformTable();
  auto chunk = MakeChunk(10);
  std::weak_ptr<Chunk> weak = chunk;
  ASSERT_TRUE(fifo->InsertOrAssign(MakeItem(1, 1.0, {chunk})).ok());
  ASSERT_TRUE(other->InsertOrAssign(MakeItem(2, 1.0, {chunk})).ok());
  chunk.reset();
  ASSERT_TRUE(fifo->MutateItems({}, {1}).ok());
  EXPECT_FALSE(weak.expired());
  auto sample = other->Sample(kTimeout);
  ASSERT_TRUE(sample.ok());
  ASSERT_TRUE(other->MutateItems({}, {2}).ok());
  EXPECT_FALSE(weak.expired());  // The sample still holds it.
  sample = absl::CancelledError("drop");
  EXPECT_TRUE(weak.expired());
}

TEST(TableTest, InfoDescribesTheTable) {
  auto table = MakeTable(std::make_unique<PrioritizedSelector>(0.8),
                         std::make_unique<FifoSelector>(), 42, 3);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
  TableInfo info = table->info();
  EXPECT_EQ(info.name(), "table");
  EXPECT_EQ(info.max_size(), 42);
  EXPECT_EQ(info.max_times_sampled(), 3);
  EXPECT_DOUBLE_EQ(info.sampler_options().prioritized().priority_exponent(),
                   0.8);
  EXPECT_TRUE(info.remover_options().fifo());
  EXPECT_EQ(info.current_size(), 1);
  EXPECT_EQ(info.rate_limiter_info().min_size_to_sample(), 1);
  EXPECT_FALSE(info.has_signature());
}

TEST(TableTest, ConcurrentInsertSampleMutateStaysConsistent) {
  auto table = MakeTable(std::make_unique<PrioritizedSelector>(1.0),
                         std::make_unique<FifoSelector>(), /*max_size=*/500,
                         /*max_times_sampled=*/0,
                         SampleToInsertRatioRateLimiter(2.0, 10, -200, 200));
  constexpr int kWriters = 4;
  constexpr int kItemsPerWriter = 2000;
  std::atomic<int64_t> inserted{0}, sampled{0};
  std::atomic<bool> writers_done{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kItemsPerWriter; ++i) {
        const uint64_t key = w * kItemsPerWriter + i;
        // The samplers keep the cursor moving, so inserts do progress; the
        // timeout only guards against a hang.
        absl::Status status =
            table->InsertOrAssign(MakeItem(key, 1.0 + i % 7), kTimeout);
        ASSERT_TRUE(status.ok()) << status;
        ++inserted;
      }
    });
  }
  for (int s = 0; s < 2; ++s) {
    threads.emplace_back([&] {
      while (!writers_done) {
        auto batch = table->SampleFlexibleBatch(16, absl::Milliseconds(50));
        if (batch.ok()) sampled += batch->size();
      }
    });
  }
  threads.emplace_back([&] {
    uint64_t key = 0;
    while (!writers_done) {
      std::vector<KeyWithPriority> updates(8);
      for (auto& update : updates) {
        update.set_key(key++ % (kWriters * kItemsPerWriter));
        update.set_priority(static_cast<double>(key % 5));
      }
      ASSERT_TRUE(table->MutateItems(updates, {}).ok());
      absl::SleepFor(absl::Microseconds(100));
    }
  });
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  writers_done = true;
  for (size_t i = kWriters; i < threads.size(); ++i) threads[i].join();

  TableInfo info = table->info();
  EXPECT_EQ(inserted.load(), kWriters * kItemsPerWriter);
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(),
            kWriters * kItemsPerWriter);
  EXPECT_EQ(info.rate_limiter_info().sample_stats().completed(),
            sampled.load());
  EXPECT_EQ(info.current_size(), 500);
  EXPECT_EQ(table->size(), 500);
}

}  // namespace
}  // namespace deepmind::reverb
