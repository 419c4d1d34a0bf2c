// TableStats: a table's state and counters at one moment (Table::stats()),
// what its metrics show (cc/service/metrics.h).
#ifndef REVERB_CC_CORE_TABLE_STATS_H_
#define REVERB_CC_CORE_TABLE_STATS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace deepmind::reverb {

struct TableStats {
  std::string name;
  int64_t size = 0;
  int64_t max_size = 0;
  // The rate limiter's counts (server_info's insert_stats and sample_stats
  // `completed`): zeroed by Reset, as there.
  int64_t inserts = 0;
  int64_t samples = 0;
  int64_t deletes = 0;
  // The distinct chunks the items reference (chunk_census.h).
  int64_t chunks = 0;
  int64_t chunk_bytes = 0;
  int64_t chunk_references = 0;
  // Insert and sample requests the rate limiter held back at least once
  // (never zeroed), and the time the table's worker waited with only such
  // requests queued (TableInfo.table_worker_time's waiting_for_sampling_ms
  // and waiting_for_inserts_ms; a wait counts once it has ended).
  int64_t inserts_blocked = 0;
  int64_t samples_blocked = 0;
  absl::Duration insert_blocked_time;
  absl::Duration sample_blocked_time;
  // The rate limiter's window (rate_limiter.h): the cursor
  // inserts * samples_per_insert - samples, kept within [min_diff, max_diff].
  double samples_per_insert = 0;
  double cursor = 0;
  double min_diff = 0;
  double max_diff = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_TABLE_STATS_H_
