// RenderMetrics: a service's metrics in Prometheus' text format
// (prometheus_text.h), what GET /metrics answers (metrics_http.h). Read at
// each call: the tables' stats under their locks (no walk over items; see
// Table::stats), the service's counters (service_metrics.h) and the
// checkpointer's (save_progress.h). Counters are named *_total, durations
// in seconds (*_seconds), sizes in bytes (*_bytes); every per-table metric
// has the label table="<name>".
//
// Per table:
//   reverb_table_size, reverb_table_max_size                      gauges
//   reverb_table_inserts_total, _samples_total, _deletes_total    counters
//     (the rate limiter's counts: zeroed by a Reset, as server_info's)
//   reverb_table_chunks, reverb_table_chunk_bytes                 gauges
//   reverb_table_items_per_chunk (references from items / chunks)  gauge
//   reverb_table_inserts_blocked_total, _samples_blocked_total    counters
//   reverb_table_insert_blocked_seconds_total,
//   reverb_table_sample_blocked_seconds_total                     counters
//   reverb_table_rate_limiter_cursor, _min_diff, _max_diff,
//   reverb_table_rate_limiter_samples_per_insert                  gauges
// Per server:
//   reverb_server_open_streams{kind="insert"|"sample"}            gauge
//   reverb_insert_latency_seconds, reverb_sample_latency_seconds,
//   reverb_mutate_latency_seconds                                 histograms
//   reverb_checkpoint_in_progress, reverb_checkpoint_progress_bytes,
//   reverb_checkpoint_progress_total_bytes,
//   reverb_checkpoint_last_duration_seconds,
//   reverb_checkpoint_last_size_bytes                             gauges
//   reverb_checkpoints_total, reverb_checkpoint_failures_total    counters
//     (the checkpoint ones only with a checkpointer)
//   reverb_process_resident_memory_bytes                          gauge
#ifndef REVERB_CC_SERVICE_METRICS_H_
#define REVERB_CC_SERVICE_METRICS_H_

#include <string>

#include "cc/service/service.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

REVERB_EXPORT std::string RenderMetrics(const ReverbServiceImpl& service);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_METRICS_H_
