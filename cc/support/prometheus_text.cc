#include "cc/support/prometheus_text.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace deepmind::reverb {
namespace {

// `text` with backslashes and newlines (and, in label values, double
// quotes) escaped.
std::string Escape(absl::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 9.007199254740992e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return absl::StrFormat("%.17g", value);
}

}  // namespace

void PrometheusText::Family(absl::string_view name, absl::string_view type,
                            absl::string_view help) {
  absl::StrAppend(&text_, "# HELP ", name, " ", Escape(help, false), "\n",
                  "# TYPE ", name, " ", type, "\n");
}

void PrometheusText::Sample(absl::string_view name, const Labels& labels,
                            double value) {
  absl::StrAppend(&text_, name);
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::StrAppend(&text_, i == 0 ? "" : ",", labels[i].first, "=\"",
                      Escape(labels[i].second, true), "\"");
    }
    text_ += '}';
  }
  absl::StrAppend(&text_, " ", FormatValue(value), "\n");
}

void PrometheusText::Histogram(absl::string_view name, const Labels& labels,
                               const LatencyHistogram::Snapshot& snapshot) {
  const std::string bucket = absl::StrCat(name, "_bucket");
  int64_t cumulative = 0;
  for (int i = 0; i < LatencyHistogram::kNumBuckets; ++i) {
    cumulative += snapshot.buckets[i];
    Labels with_le = labels;
    with_le.emplace_back(
        "le", i < static_cast<int>(LatencyHistogram::kBounds.size())
                  ? absl::StrFormat("%g", LatencyHistogram::kBounds[i])
                  : "+Inf");
    Sample(bucket, with_le, static_cast<double>(cumulative));
  }
  Sample(absl::StrCat(name, "_sum"), labels, snapshot.sum_seconds);
  Sample(absl::StrCat(name, "_count"), labels,
         static_cast<double>(snapshot.count));
}

}  // namespace deepmind::reverb
