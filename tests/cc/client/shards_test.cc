#include "cc/client/shards.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "cc/rate_limiters/rate_limiter.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"
#include "cc/support/mutex.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using ::deepmind::reverb::testing::MakeItem;
using ::deepmind::reverb::testing::StartLoopbackServer;
using ::deepmind::reverb::testing::StartLoopbackShards;
using ::deepmind::reverb::testing::WaitFor;

RateLimiter MinSize(int64_t min_size) {
  return *RateLimiter::Create(1, min_size, -1e9, 1e9);
}

std::shared_ptr<Table> MakeTable(std::unique_ptr<ItemSelector> sampler,
                                 int64_t min_size = 1) {
  return *Table::Create("table", std::move(sampler),
                        std::make_unique<FifoSelector>(), 1000, 0,
                        MinSize(min_size));
}

// Three servers over one table each, made by `make_table`.
class ShardsTest : public ::testing::Test {
 protected:
  template <typename MakeTableFn>
  void Start(MakeTableFn make_table) {
    for (int s = 0; s < 3; ++s) tables_.push_back(make_table(s));
    const std::vector<std::string> addresses =
        StartLoopbackShards(tables_, &servers_);
    ASSERT_EQ(addresses.size(), 3);
    auto shards = Shards::Create(addresses);
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
  }

  // Waits until a refresh has seen every table's current state.
  void WaitForSizes(std::vector<int64_t> sizes) {
    ASSERT_TRUE(WaitFor([&] {
      for (int s = 0; s < 3; ++s) {
        if (shards_->IsUp(s) && shards_->NumItems(s) != sizes[s]) return false;
      }
      return true;
    }));
  }

  std::vector<std::shared_ptr<Table>> tables_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::shared_ptr<Shards> shards_;
};

TEST(ShardsCreateTest, RejectsNoAddressAndEmptyOnes) {
  EXPECT_EQ(Shards::Create({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Shards::Create({"localhost:1", ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardsCreateTest, RejectsAnAddressGivenTwice) {
  // Shards are told apart by address (Client::ShardInfo, Python's
  // shard_info), and one server twice would get every writer's share twice.
  EXPECT_EQ(Shards::Create({"localhost:1", "localhost:2", "localhost:1"})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardsCreateTest, OneShardWeighsOneWithoutCalls) {
  // No server at all: one shard never asks for its info.
  auto shards = *Shards::Create({"localhost:1"});
  const Shards::Weights weights = shards->GetWeights("table");
  EXPECT_EQ(weights.weight, std::vector<double>({1}));
  EXPECT_EQ(shards->AcquireWriterShard(), 0);
  EXPECT_TRUE(shards->IsUp(0));
}

TEST_F(ShardsTest, UniformWeighsBySize) {
  Start([](int) { return MakeTable(std::make_unique<UniformSelector>()); });
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i <= s; ++i) {
      ASSERT_TRUE(tables_[s]->InsertOrAssign(MakeItem(100 * s + i)).ok());
    }
  }
  WaitForSizes({1, 2, 3});
  const Shards::Weights weights = shards_->GetWeights("table");
  EXPECT_FALSE(weights.round_robin);
  EXPECT_EQ(weights.weight, std::vector<double>({1, 2, 3}));
  EXPECT_EQ(weights.total, 6);
  EXPECT_EQ(weights.total_size, 6);
}

TEST_F(ShardsTest, PrioritizedWeighsByMassAndSkipsShardsThatCannotSample) {
  Start([](int s) {
    // Shard 2 needs two items before it lets a sample out.
    return MakeTable(std::make_unique<PrioritizedSelector>(2.0),
                     s == 2 ? 2 : 1);
  });
  ASSERT_TRUE(tables_[0]->InsertOrAssign(MakeItem(1, 1.0)).ok());
  ASSERT_TRUE(tables_[0]->InsertOrAssign(MakeItem(2, 2.0)).ok());
  ASSERT_TRUE(tables_[1]->InsertOrAssign(MakeItem(3, 3.0)).ok());
  ASSERT_TRUE(tables_[2]->InsertOrAssign(MakeItem(4, 10.0)).ok());
  WaitForSizes({2, 1, 1});
  const Shards::Weights weights = shards_->GetWeights("table");
  EXPECT_FALSE(weights.round_robin);
  ASSERT_EQ(weights.weight.size(), 3);
  EXPECT_DOUBLE_EQ(weights.weight[0], 1.0 + 4.0);
  EXPECT_DOUBLE_EQ(weights.weight[1], 9.0);
  EXPECT_EQ(weights.weight[2], 0);
  EXPECT_DOUBLE_EQ(weights.total, 14.0);
}

TEST_F(ShardsTest, FifoIsRoundRobinOverShardsWithItems) {
  Start([](int) { return testing::FifoTable("table", MinSize(1)); });
  ASSERT_TRUE(tables_[0]->InsertOrAssign(MakeItem(1)).ok());
  ASSERT_TRUE(tables_[2]->InsertOrAssign(MakeItem(2)).ok());
  ASSERT_TRUE(tables_[2]->InsertOrAssign(MakeItem(3)).ok());
  WaitForSizes({1, 0, 2});
  const Shards::Weights weights = shards_->GetWeights("table");
  EXPECT_TRUE(weights.round_robin);
  EXPECT_EQ(weights.weight, std::vector<double>({1, 0, 1}));
}

TEST_F(ShardsTest, WritersSpreadOverShardsThenByItems) {
  Start([](int) { return MakeTable(std::make_unique<UniformSelector>()); });
  ASSERT_TRUE(tables_[0]->InsertOrAssign(MakeItem(1)).ok());
  ASSERT_TRUE(tables_[1]->InsertOrAssign(MakeItem(2)).ok());
  WaitForSizes({1, 1, 0});
  // Equal writer counts: the fewest items first.
  std::vector<int> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(shards_->AcquireWriterShard());
  EXPECT_EQ(picks[0], 2);
  std::vector<int> per_shard(3);
  for (int shard : picks) ++per_shard[shard];
  EXPECT_EQ(per_shard, std::vector<int>({2, 2, 2}));
  shards_->ReleaseWriterShard(1);
  EXPECT_EQ(shards_->AcquireWriterShard(), 1);
  // `avoid` is respected while another shard is up.
  EXPECT_NE(shards_->AcquireWriterShard(/*avoid=*/0), 0);
}

TEST_F(ShardsTest, RebalanceMovesAWriterOffAShardWithManyMoreItems) {
  Start([](int) {
    return *Table::Create("table", std::make_unique<UniformSelector>(),
                          std::make_unique<FifoSelector>(), 1'000'000, 0,
                          MinSize(1));
  });
  // Shard 0 holds 1.25 times the items of shard 2 plus kRebalanceMinItems;
  // shard 1 less than that.
  const int64_t fewest = 4 * Shards::kRebalanceMinItems;
  const std::vector<int64_t> sizes = {fewest + Shards::kRebalanceMinItems + 1,
                                      fewest + Shards::kRebalanceMinItems / 2,
                                      fewest};
  uint64_t key = 0;
  for (int s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < sizes[s]; ++i) {
      ASSERT_TRUE(tables_[s]->InsertOrAssign(MakeItem(++key)).ok());
    }
  }
  WaitForSizes(sizes);
  // One writer on each shard.
  for (int s = 0; s < 3; ++s) shards_->AcquireWriterShard();
  EXPECT_EQ(shards_->RebalanceWriterShard(1), 1);
  EXPECT_EQ(shards_->RebalanceWriterShard(2), 2);
  EXPECT_EQ(shards_->RebalanceWriterShard(0), 2);
  // The writer is counted on shard 2 now: 0 has none, and the next goes
  // there.
  EXPECT_EQ(shards_->AcquireWriterShard(), 0);
}

TEST_F(ShardsTest, StoppedShardGoesDownWatchersRunAndItRejoins) {
  Start([](int) { return MakeTable(std::make_unique<UniformSelector>()); });
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(tables_[s]->InsertOrAssign(MakeItem(10 + s)).ok());
  }
  WaitForSizes({1, 1, 1});
  Notification down;
  const int64_t watch = shards_->Watch(1, [&] {
    if (!down.HasBeenNotified()) down.Notify();
  });
  const int port = servers_[1]->port();
  servers_[1]->Stop();
  servers_[1].reset();
  ASSERT_TRUE(down.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_FALSE(shards_->IsUp(1));
  EXPECT_EQ(shards_->GetWeights("table").weight,
            std::vector<double>({1, 0, 1}));
  // Writers go elsewhere while it is down.
  for (int i = 0; i < 4; ++i) EXPECT_NE(shards_->AcquireWriterShard(), 1);
  shards_->Unwatch(watch);

  // Keys handed over while it is down are deleted once it is back.
  auto restarted = StartLoopbackServer({tables_[1]}, port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  shards_->DeleteOnRejoin(1, "table", {11, 12345});
  ASSERT_TRUE(WaitFor([&] { return tables_[1]->size() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return shards_->IsUp(1); }));
  (*restarted)->Stop();
}

TEST_F(ShardsTest, MarkDownCallsWatchersOnceUntilTheShardAnswers) {
  Start([](int) { return MakeTable(std::make_unique<UniformSelector>()); });
  WaitForSizes({0, 0, 0});
  int calls = 0;
  const int64_t watch = shards_->Watch(0, [&] { ++calls; });
  shards_->MarkDown(0);
  shards_->MarkDown(0);
  EXPECT_EQ(calls, 1);
  // The server is alive: the next refresh brings it back.
  EXPECT_TRUE(WaitFor([&] { return shards_->IsUp(0); }));
  shards_->Unwatch(watch);
  shards_->MarkDown(0);
  EXPECT_EQ(calls, 1);
}

// (The refresher brings the shard back within a refresh, so the watcher,
// not IsUp, tells what MarkDown did.)
TEST_F(ShardsTest, AFailureFromBeforeTheShardCameBackLeavesItUp) {
  Start([](int) { return MakeTable(std::make_unique<UniformSelector>()); });
  WaitForSizes({0, 0, 0});
  std::atomic<int> calls = 0;
  const int64_t watch = shards_->Watch(0, [&] { ++calls; });
  const int64_t before = shards_->Epoch(0);
  shards_->MarkDown(0, before);
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(WaitFor([&] { return shards_->IsUp(0); }));
  EXPECT_EQ(shards_->Epoch(0), before + 1);
  shards_->MarkDown(0, before);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(shards_->IsUp(0));
  shards_->MarkDown(0, before + 1);
  EXPECT_EQ(calls, 2);
  shards_->Unwatch(watch);
}

}  // namespace
}  // namespace deepmind::reverb
