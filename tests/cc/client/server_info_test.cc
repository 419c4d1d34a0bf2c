#include "cc/client/server_info.h"

#include <vector>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TableInfo Table(const std::string& name, int64_t size, double mass,
                bool can_sample, int64_t inserts) {
  TableInfo table;
  table.set_name(name);
  table.set_max_size(100);
  table.set_max_times_sampled(3);
  table.set_current_size(size);
  table.set_num_episodes(size / 2);
  table.set_priority_mass(mass);
  table.set_samples_blocked(!can_sample);
  table.mutable_rate_limiter_info()->set_min_size_to_sample(7);
  table.mutable_rate_limiter_info()->mutable_insert_stats()->set_completed(
      inserts);
  table.mutable_table_worker_time()->set_running_ms(size);
  return table;
}

ServerInfoResponse Shard(uint64_t id, std::vector<TableInfo> tables) {
  ServerInfoResponse info;
  info.mutable_tables_state_id()->set_low(id);
  for (auto& table : tables) *info.add_table_info() = std::move(table);
  return info;
}

TEST(MergeServerInfoTest, SumsCountsKeepsSettingsAndMatchesByName) {
  const std::vector<ServerInfoResponse> shards = {
      Shard(1, {Table("a", 10, 1.5, false, 20), Table("b", 4, 0, true, 4)}),
      Shard(2, {Table("b", 6, 0, false, 6), Table("a", 2, 2.5, true, 3)}),
  };
  const ServerInfoResponse merged = MergeServerInfo(shards);
  ASSERT_EQ(merged.table_info_size(), 2);
  const TableInfo& a = merged.table_info(0);
  EXPECT_EQ(a.name(), "a");
  EXPECT_EQ(a.current_size(), 12);
  EXPECT_EQ(a.max_size(), 200);
  EXPECT_EQ(a.max_times_sampled(), 3);
  EXPECT_EQ(a.num_episodes(), 6);
  EXPECT_DOUBLE_EQ(a.priority_mass(), 4.0);
  EXPECT_FALSE(a.samples_blocked());
  EXPECT_EQ(a.rate_limiter_info().min_size_to_sample(), 7);
  EXPECT_EQ(a.rate_limiter_info().insert_stats().completed(), 23);
  EXPECT_EQ(a.table_worker_time().running_ms(), 12);
  const TableInfo& b = merged.table_info(1);
  EXPECT_EQ(b.name(), "b");
  EXPECT_EQ(b.current_size(), 10);
  EXPECT_FALSE(b.samples_blocked());
}

TEST(MergeServerInfoTest, StateIdChangesWithAnyShard) {
  const auto id = [](uint64_t first, uint64_t second) {
    const std::vector<ServerInfoResponse> shards = {Shard(first, {}),
                                                    Shard(second, {})};
    return MergeServerInfo(shards).tables_state_id().low();
  };
  EXPECT_EQ(id(1, 2), id(1, 2));
  EXPECT_NE(id(1, 2), id(1, 3));
  EXPECT_NE(id(1, 2), id(4, 2));
}

}  // namespace
}  // namespace deepmind::reverb
