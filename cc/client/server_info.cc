#include "cc/client/server_info.h"

#include <string>

#include "absl/container/flat_hash_map.h"

namespace deepmind::reverb {
namespace {

void AddCounts(const TableInfo& from, TableInfo* to) {
  to->set_max_size(to->max_size() + from.max_size());
  to->set_current_size(to->current_size() + from.current_size());
  to->set_num_episodes(to->num_episodes() + from.num_episodes());
  to->set_num_deleted_episodes(to->num_deleted_episodes() +
                               from.num_deleted_episodes());
  to->set_num_unique_samples(to->num_unique_samples() +
                             from.num_unique_samples());
  to->set_priority_mass(to->priority_mass() + from.priority_mass());
  to->set_samples_blocked(to->samples_blocked() && from.samples_blocked());

  const RateLimiterInfo& limiter = from.rate_limiter_info();
  RateLimiterInfo* merged = to->mutable_rate_limiter_info();
  merged->mutable_insert_stats()->set_completed(
      merged->insert_stats().completed() + limiter.insert_stats().completed());
  merged->mutable_sample_stats()->set_completed(
      merged->sample_stats().completed() + limiter.sample_stats().completed());

  const TableWorkerTime& time = from.table_worker_time();
  TableWorkerTime* sum = to->mutable_table_worker_time();
  sum->set_running_ms(sum->running_ms() + time.running_ms());
  sum->set_sampling_ms(sum->sampling_ms() + time.sampling_ms());
  sum->set_inserting_ms(sum->inserting_ms() + time.inserting_ms());
  sum->set_sleeping_ms(sum->sleeping_ms() + time.sleeping_ms());
  sum->set_waiting_for_sampling_ms(sum->waiting_for_sampling_ms() +
                                   time.waiting_for_sampling_ms());
  sum->set_waiting_for_inserts_ms(sum->waiting_for_inserts_ms() +
                                  time.waiting_for_inserts_ms());
}

}  // namespace

ServerInfoResponse MergeServerInfo(
    absl::Span<const ServerInfoResponse> shards) {
  ServerInfoResponse merged;
  absl::flat_hash_map<std::string, TableInfo*> tables;
  uint64_t high = 0;
  uint64_t low = 0;
  for (const ServerInfoResponse& shard : shards) {
    // Any change of any shard's id changes the combination.
    high = high * 1000003 + shard.tables_state_id().high();
    low = low * 1000003 + shard.tables_state_id().low();
    for (const TableInfo& table : shard.table_info()) {
      auto [it, added] = tables.try_emplace(table.name(), nullptr);
      if (added) {
        it->second = merged.add_table_info();
        *it->second = table;
      } else {
        AddCounts(table, it->second);
      }
    }
  }
  merged.mutable_tables_state_id()->set_high(high);
  merged.mutable_tables_state_id()->set_low(low);
  return merged;
}

}  // namespace deepmind::reverb
