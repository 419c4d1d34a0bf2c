#include "cc/service/metrics.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <vector>

#include "cc/core/table_stats.h"
#include "cc/support/prometheus_text.h"

namespace deepmind::reverb {
namespace {

struct TableMetric {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const TableStats&);
};

const TableMetric kTableMetrics[] = {
    {"reverb_table_size", "gauge", "Items in the table.",
     [](const TableStats& s) { return double(s.size); }},
    {"reverb_table_max_size", "gauge", "The table's max_size.",
     [](const TableStats& s) { return double(s.max_size); }},
    {"reverb_table_inserts_total", "counter",
     "Items inserted (the rate limiter's count; zeroed by a reset).",
     [](const TableStats& s) { return double(s.inserts); }},
    {"reverb_table_samples_total", "counter",
     "Items sampled (the rate limiter's count; zeroed by a reset).",
     [](const TableStats& s) { return double(s.samples); }},
    {"reverb_table_deletes_total", "counter",
     "Items removed: evicted, sampled out or deleted (zeroed by a reset).",
     [](const TableStats& s) { return double(s.deletes); }},
    {"reverb_table_chunks", "gauge", "Distinct chunks the items reference.",
     [](const TableStats& s) { return double(s.chunks); }},
    {"reverb_table_chunk_bytes", "gauge",
     "Serialized bytes of the chunks the items reference, each chunk once.",
     [](const TableStats& s) { return double(s.chunk_bytes); }},
    {"reverb_table_items_per_chunk", "gauge",
     "References from items to chunks per distinct chunk (0 when empty).",
     [](const TableStats& s) {
       return s.chunks == 0 ? 0.0 : double(s.chunk_references) / s.chunks;
     }},
    {"reverb_table_inserts_blocked_total", "counter",
     "Insert requests the rate limiter held back at least once.",
     [](const TableStats& s) { return double(s.inserts_blocked); }},
    {"reverb_table_samples_blocked_total", "counter",
     "Sample requests the rate limiter held back at least once.",
     [](const TableStats& s) { return double(s.samples_blocked); }},
    {"reverb_table_insert_blocked_seconds_total", "counter",
     "Time the table waited with inserts held back by the rate limiter "
     "(counted as each wait ends).",
     [](const TableStats& s) {
       return absl::ToDoubleSeconds(s.insert_blocked_time);
     }},
    {"reverb_table_sample_blocked_seconds_total", "counter",
     "Time the table waited with samples held back by the rate limiter "
     "(counted as each wait ends).",
     [](const TableStats& s) {
       return absl::ToDoubleSeconds(s.sample_blocked_time);
     }},
    {"reverb_table_rate_limiter_cursor", "gauge",
     "The rate limiter's inserts * samples_per_insert - samples, kept "
     "within [min_diff, max_diff].",
     [](const TableStats& s) { return s.cursor; }},
    {"reverb_table_rate_limiter_min_diff", "gauge",
     "The rate limiter's min_diff.",
     [](const TableStats& s) { return s.min_diff; }},
    {"reverb_table_rate_limiter_max_diff", "gauge",
     "The rate limiter's max_diff.",
     [](const TableStats& s) { return s.max_diff; }},
    {"reverb_table_rate_limiter_samples_per_insert", "gauge",
     "The rate limiter's samples_per_insert.",
     [](const TableStats& s) { return s.samples_per_insert; }},
};

// Resident set size of this process (0 where /proc cannot tell).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

void RenderCheckpoints(const SaveProgress::Snapshot& s, PrometheusText* out) {
  const struct {
    const char* name;
    const char* type;
    const char* help;
    double value;
  } metrics[] = {
      {"reverb_checkpoint_in_progress", "gauge", "1 while a save runs.",
       s.saving ? 1.0 : 0.0},
      {"reverb_checkpoint_progress_bytes", "gauge",
       "Chunk bytes written by the running (or last) save.",
       double(s.bytes_done)},
      {"reverb_checkpoint_progress_total_bytes", "gauge",
       "Chunk bytes the running (or last) save writes.", double(s.bytes_total)},
      {"reverb_checkpoint_last_duration_seconds", "gauge",
       "Duration of the last successful save.",
       absl::ToDoubleSeconds(s.last_duration)},
      {"reverb_checkpoint_last_size_bytes", "gauge",
       "Bytes of the files of the last successful save.", double(s.last_bytes)},
      {"reverb_checkpoints_total", "counter", "Saves that ended.",
       double(s.saves)},
      {"reverb_checkpoint_failures_total", "counter", "Saves that failed.",
       double(s.failures)},
  };
  for (const auto& metric : metrics) {
    out->Family(metric.name, metric.type, metric.help);
    out->Sample(metric.name, {}, metric.value);
  }
}

}  // namespace

std::string RenderMetrics(const ReverbServiceImpl& service) {
  std::vector<TableStats> tables;
  for (const auto& table : service.tables()) tables.push_back(table->stats());
  PrometheusText out;
  for (const TableMetric& metric : kTableMetrics) {
    out.Family(metric.name, metric.type, metric.help);
    for (const TableStats& stats : tables) {
      out.Sample(metric.name, {{"table", stats.name}}, metric.value(stats));
    }
  }
  const ServiceMetrics& metrics = *service.metrics();
  out.Family("reverb_server_open_streams", "gauge",
             "InsertStream and SampleStream calls open, by kind.");
  out.Sample("reverb_server_open_streams", {{"kind", "insert"}},
             double(metrics.open_insert_streams.load()));
  out.Sample("reverb_server_open_streams", {{"kind", "sample"}},
             double(metrics.open_sample_streams.load()));
  const struct {
    const char* name;
    const char* help;
    const LatencyHistogram& histogram;
  } histograms[] = {
      {"reverb_insert_latency_seconds",
       "From an item's arrival in an insert stream to its table's "
       "confirmation.",
       metrics.insert_latency},
      {"reverb_sample_latency_seconds",
       "From a sample stream's request of a table batch to the batch "
       "sampled.",
       metrics.sample_latency},
      {"reverb_mutate_latency_seconds", "A MutatePriorities call in its table.",
       metrics.mutate_latency},
  };
  for (const auto& histogram : histograms) {
    out.Family(histogram.name, "histogram", histogram.help);
    out.Histogram(histogram.name, {}, histogram.histogram.Read());
  }
  if (service.checkpointer() != nullptr) {
    RenderCheckpoints(service.checkpointer()->save_progress().Read(), &out);
  }
  out.Family("reverb_process_resident_memory_bytes", "gauge",
             "Resident memory of the server's process.");
  out.Sample("reverb_process_resident_memory_bytes", {},
             double(ResidentBytes()));
  return out.text();
}

}  // namespace deepmind::reverb
