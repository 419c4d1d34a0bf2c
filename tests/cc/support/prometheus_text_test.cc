#include "cc/support/prometheus_text.h"

#include <cmath>
#include <limits>

#include "absl/time/time.h"
#include "cc/support/latency_histogram.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(PrometheusTextTest, FamilyAndSamples) {
  PrometheusText out;
  out.Family("reverb_table_size", "gauge", "Items in the table.");
  out.Sample("reverb_table_size", {{"table", "a"}}, 3);
  out.Sample("reverb_table_size", {{"table", "b"}, {"kind", "x"}}, 0.5);
  out.Sample("reverb_up", {}, 1);
  EXPECT_EQ(out.text(),
            "# HELP reverb_table_size Items in the table.\n"
            "# TYPE reverb_table_size gauge\n"
            "reverb_table_size{table=\"a\"} 3\n"
            "reverb_table_size{table=\"b\",kind=\"x\"} 0.5\n"
            "reverb_up 1\n");
}

TEST(PrometheusTextTest, EscapesLabelValuesAndHelp) {
  PrometheusText out;
  out.Family("m", "gauge", "back\\slash\nnew \"quote\"");
  out.Sample("m", {{"table", "a\"b\\c\nd"}}, 1);
  EXPECT_EQ(out.text(),
            "# HELP m back\\\\slash\\nnew \"quote\"\n"
            "# TYPE m gauge\n"
            "m{table=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(PrometheusTextTest, Values) {
  PrometheusText out;
  out.Sample("a", {}, std::numeric_limits<double>::infinity());
  out.Sample("b", {}, -std::numeric_limits<double>::infinity());
  out.Sample("c", {}, std::nan(""));
  out.Sample("d", {}, -1.7976931348623157e308);
  out.Sample("e", {}, 123456789012);
  out.Sample("f", {}, 0.1);
  EXPECT_EQ(out.text(),
            "a +Inf\nb -Inf\nc NaN\nd -1.7976931348623157e+308\n"
            "e 123456789012\nf 0.10000000000000001\n");
}

TEST(LatencyHistogramTest, BucketsAreInclusiveUpperBounds) {
  LatencyHistogram histogram;
  histogram.Observe(absl::ZeroDuration());     // <= 0.0001
  histogram.Observe(absl::Microseconds(100));  // <= 0.0001
  histogram.Observe(absl::Microseconds(101));  // <= 0.00025
  histogram.Observe(absl::Seconds(10));        // <= 10
  histogram.Observe(absl::Seconds(11));        // +Inf
  histogram.Observe(-absl::Seconds(1));        // as 0
  const LatencyHistogram::Snapshot snapshot = histogram.Read();
  EXPECT_EQ(snapshot.count, 6);
  EXPECT_EQ(snapshot.buckets[0], 3);
  EXPECT_EQ(snapshot.buckets[1], 1);
  EXPECT_EQ(snapshot.buckets[15], 1);
  EXPECT_EQ(snapshot.buckets[16], 1);
  EXPECT_NEAR(snapshot.sum_seconds, 21.000201, 1e-9);
}

TEST(PrometheusTextTest, HistogramIsCumulative) {
  LatencyHistogram histogram;
  histogram.Observe(absl::Milliseconds(3));  // <= 0.005
  histogram.Observe(absl::Milliseconds(3));
  histogram.Observe(absl::Seconds(30));  // +Inf
  PrometheusText out;
  out.Histogram("h", {{"table", "t"}}, histogram.Read());
  const std::string& text = out.text();
  EXPECT_NE(text.find("h_bucket{table=\"t\",le=\"0.0025\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("h_bucket{table=\"t\",le=\"0.005\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("h_bucket{table=\"t\",le=\"10\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("h_bucket{table=\"t\",le=\"+Inf\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("h_sum{table=\"t\"} 30.006\n"), std::string::npos);
  EXPECT_NE(text.find("h_count{table=\"t\"} 3\n"), std::string::npos);
}

}  // namespace
}  // namespace deepmind::reverb
