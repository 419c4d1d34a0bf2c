// PrometheusText: writes Prometheus' text exposition format (version 0.0.4,
// what GET /metrics answers with kContentType):
//
//   # HELP reverb_table_size Items in the table.
//   # TYPE reverb_table_size gauge
//   reverb_table_size{table="uniform"} 12
//
// Family() starts a metric family (its HELP and TYPE lines); the samples
// that follow belong to it. Label values are escaped (backslash, double
// quote, newline), as is HELP text (backslash, newline); values are
// written exactly (integers without a fraction, others with 17 digits,
// +Inf, -Inf, NaN). Not thread-safe.
#ifndef REVERB_CC_SUPPORT_PROMETHEUS_TEXT_H_
#define REVERB_CC_SUPPORT_PROMETHEUS_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "cc/support/export.h"
#include "cc/support/latency_histogram.h"

namespace deepmind::reverb {

class REVERB_EXPORT PrometheusText {
 public:
  static constexpr char kContentType[] = "text/plain; version=0.0.4";

  using Labels = std::vector<std::pair<std::string, std::string>>;

  // `type`: counter (then `name` ends in _total), gauge or histogram.
  void Family(absl::string_view name, absl::string_view type,
              absl::string_view help);
  // One sample named `name` (the family's, or it with a suffix).
  void Sample(absl::string_view name, const Labels& labels, double value);
  // The samples of a histogram family named `name`: cumulative
  // `name_bucket{le=...}` (seconds) up to +Inf, `name_sum` and
  // `name_count`.
  void Histogram(absl::string_view name, const Labels& labels,
                 const LatencyHistogram::Snapshot& snapshot);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_PROMETHEUS_TEXT_H_
