// Sampler against a real server on loopback, whose tables the tests fill
// directly.
#include "cc/client/sampler.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cc/client/connection.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/service/server.h"
#include "cc/tensor/compression.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::FifoTable;
using testing::MakeInt32Item;
using testing::MakeTensor;
using testing::Values;
using testing::WaitFor;

// Against hangs only.
constexpr absl::Duration kPatience = absl::Seconds(30);

class SamplerTest : public testing::ConnectedServerTest {
 protected:
  std::unique_ptr<Sampler> NewSampler(const std::string& table,
                                      const SamplerOptions& options) {
    auto sampler = Sampler::Create(connection_, table, options);
    EXPECT_TRUE(sampler.ok()) << sampler.status();
    return sampler.ok() ? *std::move(sampler) : nullptr;
  }

  static void Insert(Table& table, uint64_t key, int32_t value) {
    ASSERT_TRUE(
        table.InsertOrAssign(MakeInt32Item(key, 1.0, value), kPatience).ok());
  }

  // Expects the next sample to fail with `code`, and the sampler's error to
  // be of that code.
  static void ExpectFailsWith(Sampler& sampler, absl::StatusCode code) {
    auto sample = sampler.GetNextSample(kPatience);
    EXPECT_EQ(sample.status().code(), code) << sample.status();
    EXPECT_EQ(sampler.error().code(), code);
  }

  // A server with one table, "fifo", that holds one item (key 1).
  std::shared_ptr<Table> StartOneItemFifo() {
    auto table = FifoTable("fifo", *MinSizeRateLimiter(1));
    StartServer({table});
    Insert(*table, 1, 7);
    return table;
  }

  static int32_t TimesSampled(const Table& table, uint64_t key) {
    auto item = table.Get(key);
    return item.ok() ? item->times_sampled() : -1;
  }

  // The window of a sampler whose consumer has taken `taken` samples of
  // item `key` and now takes no more: what its worker draws ahead.
  static int32_t WindowAfter(const Table& table, uint64_t key, int64_t taken) {
    EXPECT_TRUE(WaitFor([&] { return TimesSampled(table, key) >= taken + 4; },
                        kPatience));
    absl::SleepFor(absl::Milliseconds(300));
    return TimesSampled(table, key) - taken;
  }
};

TEST_F(SamplerTest, CreateRejectsNonPositiveCounts) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  std::vector<SamplerOptions> bad(7);
  bad[0].max_samples = 0;
  bad[1].max_samples = -2;
  bad[2].max_samples_per_stream = 0;
  bad[3].max_in_flight_samples_per_worker = 0;
  bad[4].max_in_flight_samples_per_worker = -1;
  bad[5].num_workers = 0;
  bad[6].max_in_flight_bytes_per_worker = -1;
  for (const SamplerOptions& options : bad) {
    EXPECT_EQ(Sampler::Create(connection_, "t", options).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  SamplerOptions unlimited;
  unlimited.max_samples = -1;
  unlimited.max_samples_per_stream = -1;
  EXPECT_TRUE(Sampler::Create(connection_, "t", unlimited).ok());
}

TEST_F(SamplerTest, WorkersTogetherReturnEachItemOfAQueueOnce) {
  constexpr int kItems = 200;
  auto table =
      FifoTable("queue", *MinSizeRateLimiter(1), 1000, /*max_times_sampled=*/1);
  StartServer({table});
  for (int key = 1; key <= kItems; ++key) Insert(*table, key, 10 * key);
  SamplerOptions options;
  options.num_workers = 4;
  options.max_in_flight_samples_per_worker = 5;
  options.max_samples = kItems;
  auto sampler = NewSampler("queue", options);
  std::set<uint64_t> keys;
  for (int i = 0; i < kItems; ++i) {
    auto sample = sampler->GetNextSample(kPatience);
    ASSERT_TRUE(sample.ok()) << sample.status();
    const uint64_t key = sample->info->item().key();
    EXPECT_TRUE(keys.insert(key).second) << "key " << key << " twice";
    EXPECT_EQ(Values<int32_t>(sample->columns[0]),
              (std::vector<int32_t>{10 * static_cast<int32_t>(key)}));
  }
  EXPECT_EQ(keys.size(), kItems);
  EXPECT_EQ(sampler->GetNextSample(kPatience).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(table->size(), 0);
}

TEST_F(SamplerTest, MaxSamplesIsAlsoWhatTheServerSamples) {
  for (int64_t per_stream : {int64_t{-1}, int64_t{3}}) {
    SCOPED_TRACE(per_stream);
    auto table = StartOneItemFifo();
    SamplerOptions options;
    options.num_workers = 3;
    options.max_in_flight_samples_per_worker = 4;
    options.max_samples = 25;
    options.max_samples_per_stream = per_stream;
    auto sampler = NewSampler("fifo", options);
    for (int i = 0; i < 25; ++i) {
      auto sample = sampler->GetNextSample(kPatience);
      ASSERT_TRUE(sample.ok()) << sample.status();
      EXPECT_EQ(Values<int32_t>(sample->columns[0]), (std::vector<int32_t>{7}));
    }
    for (int i = 0; i < 2; ++i) {
      auto end = sampler->GetNextSample(kPatience);
      EXPECT_EQ(end.status().code(), absl::StatusCode::kOutOfRange);
      EXPECT_EQ(end.status().message(),
                "The sampler has returned all its 25 samples.");
    }
    EXPECT_EQ(TimesSampled(*table, 1), 25);
    EXPECT_TRUE(sampler->error().ok()) << sampler->error();
  }
}

TEST_F(SamplerTest, SamplesInFlightAreBoundedByTheQueue) {
  auto table = StartOneItemFifo();
  SamplerOptions options;
  options.num_workers = 2;
  options.max_in_flight_samples_per_worker = 3;
  auto sampler = NewSampler("fifo", options);
  // Nothing is taken: the workers stop at 2 x 3 samples.
  ASSERT_TRUE(WaitFor([&] { return TimesSampled(*table, 1) >= 6; }, kPatience));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(TimesSampled(*table, 1), 6);
  // Each sample taken makes room for one more.
  for (int taken = 1; taken <= 10; ++taken) {
    ASSERT_TRUE(sampler->GetNextSample(kPatience).ok());
    ASSERT_TRUE(WaitFor([&] { return TimesSampled(*table, 1) >= 6 + taken; },
                        kPatience));
    EXPECT_LE(TimesSampled(*table, 1), 6 + taken);
  }
  // Workers waiting for room do not hold Close() up.
  sampler->Close();
  EXPECT_EQ(sampler->GetNextSample(kPatience).status().code(),
            absl::StatusCode::kCancelled);
}

TEST_F(SamplerTest, SmallSamplesWidenTheWindowWithinTheByteBudget) {
  // Samples of a few bytes: a budget of 1 MiB would hold thousands, so the
  // window grows to kWindowGrowth times max_in_flight_samples_per_worker;
  // a budget smaller than one sample leaves it as it is.
  for (const int64_t budget : {int64_t{1} << 20, int64_t{1}}) {
    SCOPED_TRACE(budget);
    auto table = StartOneItemFifo();
    SamplerOptions options;
    options.max_in_flight_samples_per_worker = 3;
    options.max_in_flight_bytes_per_worker = budget;
    auto sampler = NewSampler("fifo", options);
    const int32_t window = budget > 1 ? 3 * Sampler::kWindowGrowth : 3;
    // Nothing is taken: the worker stops at its window.
    ASSERT_TRUE(
        WaitFor([&] { return TimesSampled(*table, 1) >= window; }, kPatience));
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_EQ(TimesSampled(*table, 1), window);
    for (int taken = 0; taken < 2 * window; ++taken) {
      auto sample = sampler->GetNextSample(kPatience);
      ASSERT_TRUE(sample.ok()) << sample.status();
    }
    sampler->Close();
  }
}

TEST_F(SamplerTest, TheWindowFollowsTheSizeOfTheLatestSamples) {
  // Under an 82 KiB budget samples of 16 KiB get a window of 5, samples of
  // 4 KiB one of 20. After many large samples, then many small ones, the
  // window is the small ones': a mean over every sample received would
  // still give 82 KiB / ~12.6 KiB = 6.
  auto table = FifoTable("fifo", *MinSizeRateLimiter(1), /*max_size=*/1);
  StartServer({table});
  auto insert = [&](uint64_t key, int64_t values) {
    ChunkData chunk;
    chunk.set_chunk_key(1'000'000 + key);
    chunk.mutable_sequence_range()->set_episode_id(1);
    const Tensor step = MakeTensor<int32_t>(tensorflow::DT_INT32, {1, values},
                                            std::vector<int32_t>(values, 5));
    ASSERT_TRUE(
        CompressTensorAsProto(step, chunk.mutable_data()->add_tensors()).ok());
    chunk.set_data_tensors_len(1);
    chunk.set_data_uncompressed_size(4 * values);
    ASSERT_TRUE(
        table
            ->InsertOrAssign(
                testing::MakeItem(key, 1.0, {std::make_shared<Chunk>(chunk)}),
                kPatience)
            .ok());
  };
  insert(1, 4096);
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 3;
  options.max_in_flight_bytes_per_worker = 82 << 10;
  auto sampler = NewSampler("fifo", options);
  constexpr int64_t kLarge = 20 * Sampler::kAverageHorizon;
  for (int64_t i = 0; i < kLarge; ++i) {
    ASSERT_TRUE(sampler->GetNextSample(kPatience).ok());
  }
  EXPECT_EQ(WindowAfter(*table, 1, kLarge), 5);
  insert(2, 1024);  // Takes item 1's place.
  constexpr int64_t kSmall = 8 * Sampler::kAverageHorizon;
  for (int64_t small = 0; small < kSmall;) {
    auto sample = sampler->GetNextSample(kPatience);
    ASSERT_TRUE(sample.ok()) << sample.status();
    if (sample->info->item().key() == 2) ++small;
  }
  EXPECT_EQ(WindowAfter(*table, 2, kSmall), 20);
  sampler->Close();
}

TEST_F(SamplerTest, AConsumerThatWaitsForSamplesWidensTheWindowFurther) {
  // Samples of 4 bytes under a 1 MiB budget: a window of kWindowGrowth x 3
  // at first. A consumer that takes them as fast as it can finds the queue
  // empty, again and again: the window doubles after each window's worth
  // of samples, up to kMaxWindowGrowth x 3. A consumer slower than the
  // worker finds the queue full instead, and the window halves back.
  auto table = StartOneItemFifo();
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 3;
  options.max_in_flight_bytes_per_worker = 1 << 20;
  auto sampler = NewSampler("fifo", options);
  int64_t taken = 0;
  for (; taken < 20 * 3 * Sampler::kMaxWindowGrowth; ++taken) {
    auto sample = sampler->GetNextSample(kPatience);
    ASSERT_TRUE(sample.ok()) << sample.status();
  }
  EXPECT_EQ(WindowAfter(*table, 1, taken), 3 * Sampler::kMaxWindowGrowth);
  for (const int64_t end = taken + 10 * 3 * Sampler::kMaxWindowGrowth;
       taken < end; ++taken) {
    auto sample = sampler->GetNextSample(kPatience);
    ASSERT_TRUE(sample.ok()) << sample.status();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(WindowAfter(*table, 1, taken), 3 * Sampler::kWindowGrowth);
  sampler->Close();
}

TEST_F(SamplerTest, PerCallTimeoutIsNotAnError) {
  auto table = FifoTable("fifo", *MinSizeRateLimiter(1));
  StartServer({table});
  auto sampler = NewSampler("fifo", SamplerOptions());
  auto sample = sampler->GetNextSample(absl::Milliseconds(100));
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(sampler->GetNextBatch(3, absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(sampler->error().ok()) << sampler->error();
  Insert(*table, 1, 7);
  sample = sampler->GetNextSample(kPatience);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(Values<int32_t>(sample->columns[0]), (std::vector<int32_t>{7}));
}

TEST_F(SamplerTest, BatchesFillAndEndBeforeAnError) {
  auto table = StartOneItemFifo();
  SamplerOptions options;
  options.max_samples = 5;
  auto sampler = NewSampler("fifo", options);
  auto batch = sampler->GetNextBatch(2, kPatience, kPatience);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->size(), 2);
  // Three samples remain: the batch ends with them, the end comes next.
  batch = sampler->GetNextBatch(5, kPatience, kPatience);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->size(), 3);
  for (const Sample& sample : *batch) {
    EXPECT_EQ(Values<int32_t>(sample.columns[0]), (std::vector<int32_t>{7}));
  }
  EXPECT_EQ(sampler->GetNextBatch(5, kPatience, kPatience).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SamplerTest, RateLimiterTimeoutIsTheSamplersLastWord) {
  auto table = FifoTable("empty", *MinSizeRateLimiter(1));
  StartServer({table});
  SamplerOptions options;
  options.rate_limiter_timeout = absl::Milliseconds(100);
  auto sampler = NewSampler("empty", options);
  ExpectFailsWith(*sampler, absl::StatusCode::kDeadlineExceeded);
  // Sticky: an item that comes later is not sampled.
  Insert(*table, 1, 7);
  EXPECT_EQ(sampler->GetNextSample(kPatience).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(TimesSampled(*table, 1), 0);
}

TEST_F(SamplerTest, UnknownTableIsNotFoundForGood) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  SamplerOptions options;
  options.num_workers = 2;
  auto sampler = NewSampler("nope", options);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(sampler->GetNextSample(kPatience).status().code(),
              absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(sampler->error().code(), absl::StatusCode::kNotFound);
}

TEST_F(SamplerTest, AnUnreachableServerIsRetriedThenUnavailable) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  server_->Stop();
  server_.reset();  // Nothing listens on the port any more.
  SamplerOptions options;
  options.num_workers = 2;
  options.reconnect_window = absl::Seconds(3);
  auto sampler = NewSampler("t", options);
  // Within the window the workers retry: the call times out on its own.
  EXPECT_EQ(sampler->GetNextSample(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(sampler->error().ok()) << sampler->error();
  // Then they give up.
  ExpectFailsWith(*sampler, absl::StatusCode::kUnavailable);
}

TEST_F(SamplerTest, AStoppingServerEndsEveryWorkerWithCancelled) {
  auto table = FifoTable("empty", *MinSizeRateLimiter(1));
  StartServer({table});
  const long unused = table.use_count();
  SamplerOptions options;
  options.num_workers = 3;
  options.reconnect_window = absl::Hours(1);
  auto sampler = NewSampler("empty", options);
  // Each worker's request waits at the table (its reactor holds the table).
  // A server stopped before a request reached it would look like one not up
  // yet, which that worker would retry.
  ASSERT_TRUE(
      WaitFor([&] { return table.use_count() >= unused + 3; }, kPatience));
  EXPECT_EQ(sampler->GetNextSample(absl::Milliseconds(200)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  server_->Stop();
  // Final, not retried for the hour of the reconnect window.
  ExpectFailsWith(*sampler, absl::StatusCode::kCancelled);
  sampler->Close();  // Joins all three workers.
}

TEST_F(SamplerTest, CloseEndsWaitingCallsWithCancelled) {
  StartServer({FifoTable("empty", *MinSizeRateLimiter(1))});
  SamplerOptions options;
  options.num_workers = 2;
  auto sampler = NewSampler("empty", options);
  absl::Status sample_status, batch_status;
  std::thread sample_waiter(
      [&] { sample_status = sampler->GetNextSample().status(); });
  std::thread batch_waiter(
      [&] { batch_status = sampler->GetNextBatch(4).status(); });
  absl::SleepFor(absl::Milliseconds(100));
  sampler->Close();
  sample_waiter.join();
  batch_waiter.join();
  EXPECT_EQ(sample_status.code(), absl::StatusCode::kCancelled)
      << sample_status;
  EXPECT_EQ(batch_status.code(), absl::StatusCode::kCancelled) << batch_status;
  EXPECT_EQ(sampler->GetNextSample().status().code(),
            absl::StatusCode::kCancelled);
  sampler->Close();  // Idempotent.
}

TEST_F(SamplerTest, ASampleThatCannotBeUnpackedFailsTheSampler) {
  // Small samples are unpacked by the worker, large ones by other threads.
  for (int32_t rows : {1, 1000}) {
    SCOPED_TRACE(rows);
    auto table = FifoTable("queue", *MinSizeRateLimiter(1), 1000,
                           /*max_times_sampled=*/1);
    StartServer({table});
    // Raw bytes where Snappy data belongs; then a good item.
    ASSERT_TRUE(
        table
            ->InsertOrAssign(
                testing::MakeItem(1, 1.0, {testing::MakeChunk(11, 1, rows)}),
                kPatience)
            .ok());
    Insert(*table, 2, 7);
    auto sampler = NewSampler("queue", SamplerOptions());
    ExpectFailsWith(*sampler, absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(sampler->GetNextSample(kPatience).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// An item of one step whose column is int32[512] (2 KiB: a sample the
// sampler unpacks apart, kMinBytesToHandOff) holding `value` throughout;
// if `corrupt`, its compressed content is bytes that are no Snappy data.
TableItem LargeItem(uint64_t key, int32_t value, bool corrupt = false) {
  ChunkData chunk;
  chunk.set_chunk_key(key + 1'000'000);
  chunk.mutable_sequence_range()->set_episode_id(1);
  const Tensor step =
      testing::Int32(std::vector<int32_t>(512, value), {1, 512});
  EXPECT_TRUE(
      CompressTensorAsProto(step, chunk.mutable_data()->add_tensors()).ok());
  if (corrupt) {
    chunk.mutable_data()->mutable_tensors(0)->set_tensor_content("garbage");
  }
  chunk.set_data_tensors_len(1);
  chunk.set_data_uncompressed_size(step.bytes.size());
  return testing::MakeItem(key, 1.0, {std::make_shared<Chunk>(chunk)});
}

TEST_F(SamplerTest, StackedBatchesAreTheSamplesWhetherUnpackedAheadOrNot) {
  for (bool ahead : {true, false}) {
    SCOPED_TRACE(ahead);
    auto table = FifoTable("queue", *MinSizeRateLimiter(1), 1000,
                           /*max_times_sampled=*/1);
    StartServer({table});
    for (int32_t i = 1; i <= 10; ++i) {
      ASSERT_TRUE(table->InsertOrAssign(LargeItem(i, i), kPatience).ok());
    }
    SamplerOptions options;
    options.unpack_ahead = ahead;
    options.max_samples = 10;
    auto sampler = NewSampler("queue", options);
    int32_t next = 1;
    for (int64_t rows : {4, 4, 2}) {  // The last batch ends with the samples.
      auto batch = sampler->GetNextStackedBatch(4, kPatience, kPatience);
      ASSERT_TRUE(batch.ok()) << batch.status();
      ASSERT_EQ(batch->infos.size(), rows);
      ASSERT_EQ(batch->columns.size(), 1);
      EXPECT_EQ(batch->columns[0].shape, (std::vector<int64_t>{rows, 1, 512}));
      std::vector<int32_t> expected;
      for (int64_t r = 0; r < rows; ++r, ++next) {
        EXPECT_EQ(batch->infos[r]->item().key(), next);
        expected.insert(expected.end(), 512, next);
      }
      EXPECT_EQ(Values<int32_t>(batch->columns[0]), expected);
    }
    EXPECT_EQ(sampler->GetNextStackedBatch(4, kPatience).status().code(),
              absl::StatusCode::kOutOfRange);
    EXPECT_EQ(sampler->GetNextStackedBatch(0, kPatience).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(SamplerTest, SamplesOfOtherShapesAreNoBatchButSamplingGoesOn) {
  auto table = FifoTable("queue", *MinSizeRateLimiter(1), 1000,
                         /*max_times_sampled=*/1);
  StartServer({table});
  ASSERT_TRUE(table->InsertOrAssign(LargeItem(1, 1), kPatience).ok());
  Insert(*table, 2, 2);  // int32[1].
  ASSERT_TRUE(table->InsertOrAssign(LargeItem(3, 3), kPatience).ok());
  SamplerOptions options;
  options.unpack_ahead = false;
  auto sampler = NewSampler("queue", options);
  auto batch = sampler->GetNextStackedBatch(2, kPatience, kPatience);
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batch.status().message(),
            "Cannot batch column 0 (use batch_size=1 for trajectories of "
            "different lengths): Cannot stack tensors of different shapes: "
            "DT_INT32[1,512] and DT_INT32[1].");
  batch = sampler->GetNextStackedBatch(1, kPatience, kPatience);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->infos[0]->item().key(), 3);
}

TEST_F(SamplerTest, ABatchEndsBeforeASampleThatCannotBeUnpacked) {
  auto table = FifoTable("queue", *MinSizeRateLimiter(1), 1000,
                         /*max_times_sampled=*/1);
  StartServer({table});
  ASSERT_TRUE(table->InsertOrAssign(LargeItem(1, 1), kPatience).ok());
  ASSERT_TRUE(
      table->InsertOrAssign(LargeItem(2, 2, /*corrupt=*/true), kPatience).ok());
  ASSERT_TRUE(table->InsertOrAssign(LargeItem(3, 3), kPatience).ok());
  SamplerOptions options;
  options.unpack_ahead = false;
  auto sampler = NewSampler("queue", options);
  auto batch = sampler->GetNextStackedBatch(3, kPatience, kPatience);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->infos.size(), 1);
  EXPECT_EQ(batch->columns[0].shape, (std::vector<int64_t>{1, 1, 512}));
  EXPECT_EQ(Values<int32_t>(batch->columns[0]), std::vector<int32_t>(512, 1));
  EXPECT_EQ(sampler->GetNextStackedBatch(3, kPatience).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler->error().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepmind::reverb
