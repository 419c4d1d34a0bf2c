// Client::NewSampler and Client::NewSampleStream over three servers on
// loopback (shards) whose tables the tests fill directly: the samples follow
// the distribution one server holding every item would give, carry that
// server's probability and table size, and keep coming when a shard stops.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "cc/client/client.h"
#include "cc/client/connection.h"
#include "cc/core/errors.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"
#include "cc/service/server.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::MakeInt32Item;
using testing::StartLoopbackServer;
using testing::StartLoopbackShards;
using testing::Values;
using testing::WaitFor;

// Against hangs only.
constexpr absl::Duration kPatience = absl::Seconds(30);
constexpr int kShards = 3;
constexpr double kExponent = 0.8;

// Item i of shard s; its data is its key.
uint64_t Key(int shard, int i) { return 1000 * shard + i; }
int ShardOf(uint64_t key) { return static_cast<int>(key / 1000); }
double Priority(uint64_t key) { return 1.0 + key % 4 + ShardOf(key); }

std::shared_ptr<Table> PrioritizedTable() {
  return *Table::Create(
      "table", std::make_unique<PrioritizedSelector>(kExponent),
      std::make_unique<FifoSelector>(), 1000, 0, *MinSizeRateLimiter(1));
}

std::shared_ptr<Table> UniformTable() {
  return *Table::Create("table", std::make_unique<UniformSelector>(),
                        std::make_unique<FifoSelector>(), 1000, 0,
                        *MinSizeRateLimiter(1));
}

// Each item is sampled once, oldest first.
std::shared_ptr<Table> QueueTable() {
  return testing::FifoTable("table", *MinSizeRateLimiter(1), 1000,
                            /*max_times_sampled=*/1);
}

// What the tests check of a sample.
struct Drawn {
  uint64_t key;
  double probability;
  int64_t table_size;
  int32_t value;
};

Drawn Describe(const Sample& sample) {
  const std::vector<int32_t> values = Values<int32_t>(sample.columns.at(0));
  return {sample.info->item().key(), sample.info->probability(),
          sample.info->table_size(), values.empty() ? -1 : values[0]};
}

class ShardedSamplerTest : public ::testing::Test {
 protected:
  // Starts a server per shard over a table of `make_table()` holding
  // `sizes[s]` items (Key(s, i), Priority), and a Client over them, once
  // it sees them all.
  template <typename MakeTable>
  void Start(MakeTable make_table, std::vector<int> sizes) {
    for (int s = 0; s < kShards; ++s) {
      tables_.push_back(make_table());
      Fill(*tables_.back(), s, sizes[s]);
      for (int i = 0; i < sizes[s]; ++i) keys_.push_back(Key(s, i));
    }
    const std::vector<std::string> addresses =
        StartLoopbackShards(tables_, &servers_);
    ASSERT_EQ(addresses.size(), kShards);
    auto client = Client::Create(addresses);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    int64_t total = 0;
    for (int size : sizes) total += size;
    ASSERT_TRUE(WaitFor([&] {
      const Shards::Weights weights = client_->shards()->GetWeights("table");
      for (int s = 0; s < kShards; ++s) {
        if ((weights.weight[s] > 0) != (sizes[s] > 0)) return false;
      }
      return weights.total_size == total;
    }));
  }

  static void Fill(Table& table, int shard, int size) {
    for (int i = 0; i < size; ++i) {
      const uint64_t key = Key(shard, i);
      ASSERT_TRUE(table
                      .InsertOrAssign(MakeInt32Item(key, Priority(key),
                                                    static_cast<int32_t>(key)),
                                      kPatience)
                      .ok());
    }
  }

  // The probability of each item Start() made, p^a / sum (prioritized)
  // or 1 / size.
  std::map<uint64_t, double> Expected(bool prioritized) const {
    std::map<uint64_t, double> expected;
    double sum = 0;
    for (uint64_t key : keys_) {
      const double weight =
          prioritized ? std::pow(Priority(key), kExponent) : 1.0;
      expected[key] = weight;
      sum += weight;
    }
    for (auto& [key, p] : expected) p /= sum;
    return expected;
  }

  std::unique_ptr<Sampler> NewSampler(const SamplerOptions& options) {
    auto sampler = client_->NewSampler("table", options);
    EXPECT_TRUE(sampler.ok()) << sampler.status();
    return sampler.ok() ? *std::move(sampler) : nullptr;
  }

  // Over tables of {3, 3, 3} items: `next_shard()` reads the next sample and
  // returns its shard (-1 on error). Once every shard has served one, shard 1
  // stops; `drain()` reads what may still come from it, then 300 samples come
  // from the others only, and once a new server over its items is on its
  // port, from it again.
  template <typename NextShard, typename Drain>
  void ExpectToGoOnWithoutAStoppedShardUntilItRejoins(NextShard next_shard,
                                                      Drain drain) {
    std::vector<int> seen(kShards);
    while (seen[0] == 0 || seen[1] == 0 || seen[2] == 0) {
      const int shard = next_shard();
      ASSERT_GE(shard, 0);
      ++seen[shard];
    }

    const int port = servers_[1]->port();
    servers_[1]->Stop();
    drain();
    std::vector<int> after(kShards);
    for (int i = 0; i < 300; ++i) {
      const int shard = next_shard();
      ASSERT_GE(shard, 0);
      ++after[shard];
    }
    EXPECT_EQ(after[1], 0);
    EXPECT_GT(after[0], 0);
    EXPECT_GT(after[2], 0);
    EXPECT_TRUE(WaitFor([&] { return !client_->shards()->IsUp(1); }));

    tables_[1] = UniformTable();
    Fill(*tables_[1], 1, 3);
    auto restarted = StartLoopbackServer({tables_[1]}, port);
    ASSERT_TRUE(restarted.ok()) << restarted.status();
    servers_[1] = *std::move(restarted);
    bool rejoined = false;
    for (int i = 0; i < 1'000'000 && !rejoined; ++i) {
      const int shard = next_shard();
      ASSERT_GE(shard, 0);
      rejoined = shard == 1;
    }
    EXPECT_TRUE(rejoined);
  }

  std::vector<std::shared_ptr<Table>> tables_;
  std::vector<uint64_t> keys_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<Client> client_;
};

// Every sample is of a known item, carries its data, the probability
// `expected` gives it and the size of all tables together; the items'
// frequencies match `expected`: a chi-square statistic under the critical
// value at a false-alarm rate of 1e-6 (test_util.h), and a total variation
// distance under 1.4 sqrt(k / N) for k items and N samples. The mean of that
// distance is at most sqrt(2 / pi) / 2 * sum_i sqrt(p_i / N) <= 0.4 sqrt(k /
// N) (Cauchy-Schwarz), and its spread a fraction of that mean, so the bound
// (0.02 for 20 items and 10^5 samples) leaves a margin of 3.5 times the mean
// while sampling the shards uniformly (a load balancer's way: 0.4 and 0.3
// here) or a prioritized table's by size alone (0.08) fails it.
void ExpectDistribution(const std::vector<Drawn>& drawn,
                        const std::map<uint64_t, double>& expected) {
  std::map<uint64_t, int64_t> counts;
  for (const auto& [key, p] : expected) counts[key] = 0;
  int64_t wrong = 0;
  for (const Drawn& d : drawn) {
    auto it = expected.find(d.key);
    const bool right =
        it != expected.end() && d.value == static_cast<int32_t>(d.key) &&
        std::abs(d.probability - it->second) <= 1e-9 * it->second &&
        d.table_size == static_cast<int64_t>(expected.size());
    if (!right && wrong++ == 0) {
      ADD_FAILURE() << "key " << d.key << " value " << d.value
                    << " probability " << d.probability << " table_size "
                    << d.table_size;
    }
    if (it != expected.end()) ++counts[d.key];
  }
  EXPECT_EQ(wrong, 0);
  std::vector<int64_t> observed;
  std::vector<double> probabilities;
  double distance = 0;
  const double n = static_cast<double>(drawn.size());
  for (const auto& [key, p] : expected) {
    observed.push_back(counts[key]);
    probabilities.push_back(p);
    distance += std::abs(counts[key] / n - p) / 2;
  }
  EXPECT_LT(ChiSquare(observed, probabilities),
            ChiSquareCritical(static_cast<int>(expected.size()) - 1));
  EXPECT_LT(distance, 1.4 * std::sqrt(expected.size() / n));
}

std::vector<Drawn> SampleAll(Sampler& sampler, int64_t n) {
  std::vector<Drawn> drawn;
  drawn.reserve(n);
  while (static_cast<int64_t>(drawn.size()) < n) {
    auto batch = sampler.GetNextBatch(1000, kPatience);
    if (!batch.ok()) {
      ADD_FAILURE() << batch.status();
      break;
    }
    for (const Sample& sample : *batch) drawn.push_back(Describe(sample));
  }
  return drawn;
}

SamplerOptions TwoWorkers(int64_t max_samples) {
  SamplerOptions options;
  options.max_samples = max_samples;
  options.num_workers = 2;
  return options;
}

TEST_F(ShardedSamplerTest, PrioritizedSamplesFollowTheDistributionOfAllItems) {
  Start(PrioritizedTable, {2, 5, 13});
  constexpr int64_t kSamples = 100'000;
  auto sampler = NewSampler(TwoWorkers(kSamples));
  ASSERT_NE(sampler, nullptr);
  ExpectDistribution(SampleAll(*sampler, kSamples), Expected(true));
}

TEST_F(ShardedSamplerTest, UniformSamplesFollowTheDistributionOfAllItems) {
  Start(UniformTable, {2, 5, 13});
  constexpr int64_t kSamples = 100'000;
  auto sampler = NewSampler(TwoWorkers(kSamples));
  ASSERT_NE(sampler, nullptr);
  ExpectDistribution(SampleAll(*sampler, kSamples), Expected(false));
}

TEST_F(ShardedSamplerTest, StreamSamplesFollowTheDistributionOfAllItems) {
  Start(PrioritizedTable, {2, 5, 13});
  auto stream = client_->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<Drawn> drawn;
  for (int request = 0; request < 200; ++request) {
    ASSERT_TRUE((*stream)->Request(100, kPatience).ok());
    while ((*stream)->outstanding() > 0) {
      auto sample = (*stream)->Read();
      ASSERT_TRUE(sample.ok()) << sample.status();
      drawn.push_back(Describe(*sample));
    }
  }
  ExpectDistribution(drawn, Expected(true));
  EXPECT_TRUE((*stream)->Close().ok());
  // Taken from the tables directly, or all over gRPC.
  int64_t local = 0;
  for (const auto& table : tables_) local += table->info().num_local_samples();
  EXPECT_EQ(local, InProcessAllowed() ? 200 * 100 : 0);
}

TEST_F(ShardedSamplerTest, FifoTakesTheShardsInTurnEachInItsOrder) {
  Start(QueueTable, {4, 4, 4});
  SamplerOptions options;
  options.max_samples = 12;
  auto sampler = NewSampler(options);
  ASSERT_NE(sampler, nullptr);
  std::vector<uint64_t> keys;
  for (const Drawn& d : SampleAll(*sampler, 12)) {
    keys.push_back(d.key);
    EXPECT_EQ(d.probability, 1.0);  // The shard's.
    EXPECT_EQ(d.table_size, 12);
  }
  std::vector<uint64_t> expected;
  for (int i = 0; i < 4; ++i) {
    for (int s = 0; s < kShards; ++s) expected.push_back(Key(s, i));
  }
  EXPECT_EQ(keys, expected);
}

TEST_F(ShardedSamplerTest, SamplingGoesOnWithoutAStoppedShardUntilItRejoins) {
  Start(UniformTable, {3, 3, 3});
  // One worker: samples are handed out in the order they were requested, at
  // most `capacity` ahead of the consumer (the window is per shard).
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 20;
  const int64_t capacity = options.max_in_flight_samples_per_worker * kShards;
  auto sampler = NewSampler(options);
  ASSERT_NE(sampler, nullptr);
  auto next_shard = [&] {
    auto sample = sampler->GetNextSample(kPatience);
    EXPECT_TRUE(sample.ok()) << sample.status();
    return sample.ok() ? ShardOf(sample->info->item().key()) : -1;
  };
  // What was asked of shard 1 before it stopped may still come.
  auto drain = [&] {
    for (int i = 0; i < capacity; ++i) ASSERT_GE(next_shard(), 0);
  };
  ExpectToGoOnWithoutAStoppedShardUntilItRejoins(next_shard, drain);
  EXPECT_TRUE(sampler->error().ok()) << sampler->error();
}

TEST_F(ShardedSamplerTest, AStreamGoesOnWithoutAStoppedShardUntilItRejoins) {
  Start(UniformTable, {3, 3, 3});
  // A stream does not reconnect: every read succeeding shows that the
  // draws of the stopped shard were drawn again among the others.
  auto stream = *client_->NewSampleStream("table", kPatience);
  auto next_shard = [&] {
    if (stream->outstanding() == 0) {
      EXPECT_TRUE(stream->Request(10, absl::InfiniteDuration()).ok());
    }
    auto sample = stream->Read();
    EXPECT_TRUE(sample.ok()) << sample.status();
    return sample.ok() ? ShardOf(sample->info->item().key()) : -1;
  };
  // Samples requested before shard 1 stopped may still come from it.
  auto drain = [&] {
    while (stream->outstanding() > 0) ASSERT_GE(next_shard(), 0);
  };
  ExpectToGoOnWithoutAStoppedShardUntilItRejoins(next_shard, drain);
  EXPECT_TRUE(stream->ok());
}

// A stream's draws of shard 1 wait unread on its stream to the server that
// stops there; a new server on its port is found up before they are read.
// Their failure is the old server's: it must not report the new one down
// (which would cancel every stream to it until the next refresh).
TEST_F(ShardedSamplerTest, AStaleStreamDoesNotReportARestartedShardDown) {
  Start(UniformTable, {3, 3, 3});
  auto stream = *client_->NewSampleStream("table", kPatience);
  // Draws of every shard (all but surely), their requests sent.
  ASSERT_TRUE(stream->Request(60, absl::InfiniteDuration()).ok());
  const int port = servers_[1]->port();
  servers_[1]->Stop();
  ASSERT_TRUE(WaitFor([&] { return !client_->shards()->IsUp(1); }));
  tables_[1] = UniformTable();
  Fill(*tables_[1], 1, 3);
  auto restarted = StartLoopbackServer({tables_[1]}, port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  servers_[1] = *std::move(restarted);
  ASSERT_TRUE(WaitFor([&] { return client_->shards()->IsUp(1); }));

  std::atomic<int> reported_down = 0;
  const int64_t watch = client_->shards()->Watch(1, [&] { ++reported_down; });
  while (stream->outstanding() > 0) {
    auto sample = stream->Read();
    ASSERT_TRUE(sample.ok()) << sample.status();
  }
  client_->shards()->Unwatch(watch);
  EXPECT_EQ(reported_down, 0);
}

// A stream opened after shard 1 stopped, before the refresher has found it
// down (its calls wait up to kRefreshTimeout): the draws of shard 1 wait
// kShardConnectTimeout for its channel, then go to the others. The bound
// (half of a writer's kConnectTimeout, connection.h) only tells that wait
// apart from one as long as a writer's.
TEST_F(ShardedSamplerTest, AStreamDoesNotWaitLongForAShardThatIsGone) {
  Start(UniformTable, {3, 3, 3});
  servers_[1]->Stop();
  const absl::Time start = absl::Now();
  auto stream = *client_->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream->Request(30, absl::InfiniteDuration()).ok());
  for (int i = 0; i < 30; ++i) {
    auto sample = stream->Read();
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_NE(ShardOf(sample->info->item().key()), 1);
  }
  EXPECT_LT(absl::Now() - start, kConnectTimeout / 2);
  EXPECT_FALSE(client_->shards()->IsUp(1));
}

TEST_F(ShardedSamplerTest, AShardFoundDownHasItsWaitingDrawsDrawnAgain) {
  // Queues taken in turn: the second draw of shard 1 waits in its table,
  // which has nothing left.
  Start(QueueTable, {10, 1, 10});
  auto stream = *client_->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream->Request(6, kPatience).ok());
  std::vector<int> shards(6, -1);
  std::atomic<int> read{0};
  absl::Status status;
  std::thread reader([&] {
    while (status.ok() && stream->outstanding() > 0) {
      auto sample = stream->Read();
      status = sample.status();
      if (sample.ok()) shards[read++] = ShardOf(sample->info->item().key());
    }
  });
  // Shard 1's item has been read; its next draw is the next read.
  ASSERT_TRUE(WaitFor([&] { return read >= 4; }));
  // As the refresher does when a shard stops answering: its watchers cancel
  // the streams to it.
  client_->shards()->MarkDown(1);
  reader.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(std::vector<int>(shards.begin(), shards.begin() + 4),
            std::vector<int>({0, 1, 2, 0}));
  EXPECT_NE(shards[4], 1);
  EXPECT_EQ(shards[5], 2);
}

TEST_F(ShardedSamplerTest, AReadWaitsUntilAShardCanServe) {
  Start(UniformTable, {0, 0, 0});
  auto stream = *client_->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream->Request(1, absl::InfiniteDuration()).ok());
  std::thread insert([&] { Fill(*tables_[2], 2, 1); });
  auto sample = stream->Read();
  insert.join();
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->info->item().key(), Key(2, 0));
  EXPECT_EQ(sample->info->probability(), 1.0);
}

TEST_F(ShardedSamplerTest, NoShardCanServeWithinTheRateLimiterTimeout) {
  Start(UniformTable, {0, 0, 0});
  auto stream = *client_->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream->Request(1, absl::Milliseconds(100)).ok());
  const absl::Status status = stream->Read().status();
  EXPECT_TRUE(IsRateLimiterTimeout(status)) << status;
  EXPECT_EQ(status, RateLimiterTimeout());
  EXPECT_FALSE(stream->ok());
}

TEST_F(ShardedSamplerTest, ATimeoutBelowOneMillisecondStillBoundsTheWait) {
  Start(UniformTable, {0, 0, 0});
  auto stream = *client_->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream->Request(1, absl::Microseconds(500)).ok());
  // Were the timeout taken as none, the read would wait until cancelled.
  absl::Notification read;
  std::thread watchdog([&] {
    if (!read.WaitForNotificationWithTimeout(kPatience)) stream->Cancel();
  });
  const absl::Status status = stream->Read().status();
  read.Notify();
  watchdog.join();
  EXPECT_EQ(status, RateLimiterTimeout());
}

TEST_F(ShardedSamplerTest, CancelEndsAWaitForAShardThatCanServe) {
  Start(UniformTable, {0, 0, 0});
  auto stream = *client_->NewSampleStream("table", kPatience);
  absl::Status status;
  std::thread reader([&] {
    status = stream->Request(1, absl::InfiniteDuration());
    if (status.ok()) status = stream->Read().status();
  });
  stream->Cancel();
  reader.join();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
}

TEST_F(ShardedSamplerTest, CloseEndsASamplerThatWaitsForAShardThatCanServe) {
  Start(UniformTable, {0, 0, 0});
  auto sampler = NewSampler(TwoWorkers(-1));
  ASSERT_NE(sampler, nullptr);
  absl::Status status;
  std::thread consumer(
      [&] { status = sampler->GetNextSample(kPatience).status(); });
  sampler->Close();
  consumer.join();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
}

TEST_F(ShardedSamplerTest, UnknownTableIsNotFound) {
  Start(UniformTable, {1, 1, 1});
  auto stream = *client_->NewSampleStream("nope", kPatience);
  ASSERT_TRUE(stream->Request(1, absl::InfiniteDuration()).ok());
  EXPECT_EQ(stream->Read().status().code(), absl::StatusCode::kNotFound);
}

// Key 1 on every shard, its data the shard's index (keys are unique across
// shards in use; here a shard that gets a key's update shows it), and a
// stream draws it from one: its update and delete go to that shard only.
// Key 2, never sampled, is updated and deleted on every shard.
TEST_F(ShardedSamplerTest, MutatePrioritiesGoesToTheShardAKeyWasSampledFrom) {
  Start(UniformTable, {0, 0, 0});
  for (int s = 0; s < kShards; ++s) {
    ASSERT_TRUE(tables_[s]->InsertOrAssign(MakeInt32Item(1, 1, s)).ok());
  }
  ASSERT_TRUE(WaitFor([&] {
    return client_->shards()->GetWeights("table").total_size == kShards;
  }));
  // One draw (a Sampler's workers may draw ahead).
  auto stream = *client_->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream->Request(1, absl::InfiniteDuration()).ok());
  auto sample = stream->Read();
  ASSERT_TRUE(sample.ok()) << sample.status();
  const int sampled = Describe(*sample).value;
  ASSERT_GE(sampled, 0);
  ASSERT_LT(sampled, kShards);
  for (int s = 0; s < kShards; ++s) {
    ASSERT_TRUE(tables_[s]->InsertOrAssign(MakeInt32Item(2, 1, s)).ok());
  }

  KeyWithPriority one, two;
  one.set_key(1);
  one.set_priority(5);
  two.set_key(2);
  two.set_priority(7);
  ASSERT_TRUE(
      client_->MutatePriorities("table", {one, two}, {}, kPatience).ok());
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(tables_[s]->Get(1)->priority(), s == sampled ? 5 : 1)
        << "shard " << s;
    EXPECT_EQ(tables_[s]->Get(2)->priority(), 7) << "shard " << s;
  }
  ASSERT_TRUE(client_->MutatePriorities("table", {}, {1, 2}, kPatience).ok());
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(tables_[s]->Get(1).ok(), s != sampled) << "shard " << s;
    EXPECT_FALSE(tables_[s]->Get(2).ok()) << "shard " << s;
  }
}

TEST(ShardedSamplerNoServerTest, NoShardReachableIsUnavailable) {
  auto client = *Client::Create({"localhost:1", "localhost:2"});
  auto stream = *client->NewSampleStream("table", kPatience);
  ASSERT_TRUE(stream->Request(1, absl::InfiniteDuration()).ok());
  EXPECT_EQ(stream->Read().status().code(), absl::StatusCode::kUnavailable);

  // A sampler tries again within its reconnect window, then fails.
  SamplerOptions options;
  options.reconnect_window = absl::Milliseconds(100);
  auto sampler = *client->NewSampler("table", options);
  EXPECT_EQ(sampler->GetNextSample(kPatience).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ShardedSamplerNoServerTest, TheRateLimiterTimeoutBoundsTheReconnects) {
  auto client = *Client::Create({"localhost:1", "localhost:2"});
  SamplerOptions options;
  options.reconnect_window = absl::Minutes(10);
  options.rate_limiter_timeout = absl::Milliseconds(200);
  auto sampler = *client->NewSampler("table", options);
  // Not DEADLINE_EXCEEDED: the reconnect window alone would take minutes.
  EXPECT_EQ(sampler->GetNextSample(kPatience).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace deepmind::reverb
