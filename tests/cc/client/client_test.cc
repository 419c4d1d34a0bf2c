#include "cc/client/client.h"

#include <memory>
#include <string>
#include <vector>

#include "cc/rate_limiters/rate_limiter.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using ::deepmind::reverb::testing::FifoTable;
using ::deepmind::reverb::testing::MakeItem;
using ::deepmind::reverb::testing::StartLoopbackShards;

// Three servers over one table each, holding 1, 2 and 3 items, and a Client
// over them.
class ShardedClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int s = 0; s < 3; ++s) {
      tables_.push_back(
          FifoTable("table", *RateLimiter::Create(1, 1, -1e9, 1e9)));
      for (int i = 0; i <= s; ++i) {
        ASSERT_TRUE(tables_[s]->InsertOrAssign(MakeItem(100 * s + i)).ok());
      }
    }
    const std::vector<std::string> addresses =
        StartLoopbackShards(tables_, &servers_);
    ASSERT_EQ(addresses.size(), 3);
    auto client = Client::Create(addresses);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::vector<std::shared_ptr<Table>> tables_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<Client> client_;
};

TEST_F(ShardedClientTest, ServerInfoSumsShardsAndShardInfoKeepsThemApart) {
  auto info = client_->ServerInfo(absl::Seconds(30));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->table_info(0).current_size(), 6);
  std::vector<absl::StatusOr<ServerInfoResponse>> shards =
      client_->ShardInfo(absl::Seconds(30));
  ASSERT_EQ(shards.size(), 3);
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(shards[s].ok()) << shards[s].status();
    EXPECT_EQ(shards[s]->table_info(0).current_size(), s + 1);
  }
}

TEST_F(ShardedClientTest, StoppedShardHoldsUpNeitherServerInfoNorShardInfo) {
  servers_[1]->Stop();
  // Without a deadline: the call to the stopped shard is cancelled once the
  // client finds it down (or, found down already, it is not asked).
  auto info = client_->ServerInfo(absl::InfiniteDuration());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->table_info(0).current_size(), 1 + 3);
  // Known to be down now: UNAVAILABLE at once, the others as they are.
  std::vector<absl::StatusOr<ServerInfoResponse>> shards =
      client_->ShardInfo(absl::InfiniteDuration());
  EXPECT_EQ(shards[1].status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(shards[0].ok() && shards[2].ok());
  EXPECT_EQ(shards[0]->table_info(0).current_size(), 1);
  EXPECT_EQ(shards[2]->table_info(0).current_size(), 3);
}

TEST_F(ShardedClientTest, StoppedShardHoldsUpNeitherMutatePrioritiesNorReset) {
  servers_[1]->Stop();
  // Without a deadline, as above. Its items cannot change while it is down:
  // the others' do.
  EXPECT_TRUE(client_
                  ->MutatePriorities("table", {}, {0, 100, 200},
                                     absl::InfiniteDuration())
                  .ok());
  EXPECT_EQ(tables_[0]->size(), 0);
  EXPECT_EQ(tables_[1]->size(), 2);
  EXPECT_EQ(tables_[2]->size(), 2);
  // A reset it misses is an error, once the others are reset.
  EXPECT_EQ(client_->Reset("table", absl::InfiniteDuration()).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(tables_[1]->size(), 2);
  EXPECT_EQ(tables_[2]->size(), 0);
}

}  // namespace
}  // namespace deepmind::reverb
