#include "cc/service/metrics.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cc/rate_limiters/rate_limiter.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/uniform.h"
#include "cc/service/service.h"
#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::MakeChunk;
using testing::MakeItem;

std::shared_ptr<Table> MakeTable(const std::string& name, int64_t max_size,
                                 double max_diff) {
  auto limiter = RateLimiter::Create(1.0, 1, -max_diff, max_diff);
  EXPECT_TRUE(limiter.ok());
  auto table =
      Table::Create(name, std::make_unique<UniformSelector>(),
                    std::make_unique<FifoSelector>(), max_size, 0, *limiter);
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

// The sample line of `name` with `labels` in `text`, e.g.
// Line(text, "reverb_table_size", "table=\"t\"") == "3".
std::string Value(const std::string& text, const std::string& name,
                  const std::string& labels) {
  const std::string prefix =
      absl::StrCat("\n", name, labels.empty() ? "" : "{", labels,
                   labels.empty() ? "" : "}", " ");
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return "<missing>";
  const size_t start = at + prefix.size();
  return text.substr(start, text.find('\n', start) - start);
}

TEST(RenderMetricsTest, TableCountsAndChunks) {
  auto table = MakeTable("t", 3, 1e9);
  auto other = MakeTable("other", 10, 1e9);
  auto service = ReverbServiceImpl::Create({table, other});
  ASSERT_TRUE(service.ok());
  auto shared = MakeChunk(100);
  for (uint64_t key = 1; key <= 3; ++key) {
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(key, 1.0, {shared})).ok());
  }
  // Evicts item 1 (FIFO, max_size 3); the shared chunk stays referenced.
  ASSERT_TRUE(
      table->InsertOrAssign(MakeItem(4, 1.0, {shared, MakeChunk(200)})).ok());
  ASSERT_TRUE(table->Sample().ok());

  const std::string text = RenderMetrics(**service);
  const std::string t = "table=\"t\"";
  EXPECT_EQ(Value(text, "reverb_table_size", t), "3");
  EXPECT_EQ(Value(text, "reverb_table_max_size", t), "3");
  EXPECT_EQ(Value(text, "reverb_table_inserts_total", t), "4");
  EXPECT_EQ(Value(text, "reverb_table_samples_total", t), "1");
  EXPECT_EQ(Value(text, "reverb_table_deletes_total", t), "1");
  EXPECT_EQ(Value(text, "reverb_table_chunks", t), "2");
  EXPECT_EQ(Value(text, "reverb_table_chunk_bytes", t),
            absl::StrCat(shared->DataByteSizeLong() +
                         MakeChunk(200)->DataByteSizeLong()));
  // Items 2, 3, 4 reference chunk 100, item 4 chunk 200 too: 4 / 2.
  EXPECT_EQ(Value(text, "reverb_table_items_per_chunk", t), "2");
  EXPECT_EQ(Value(text, "reverb_table_rate_limiter_cursor", t), "3");
  EXPECT_EQ(Value(text, "reverb_table_size", "table=\"other\""), "0");
  EXPECT_EQ(Value(text, "reverb_table_items_per_chunk", "table=\"other\""),
            "0");
  EXPECT_NE(text.find("# TYPE reverb_table_inserts_total counter\n"),
            std::string::npos);
  EXPECT_EQ(Value(text, "reverb_server_open_streams", "kind=\"insert\""), "0");
  EXPECT_EQ(Value(text, "reverb_insert_latency_seconds_count", ""), "0");
  // No checkpointer: no checkpoint metrics.
  EXPECT_EQ(text.find("reverb_checkpoint"), std::string::npos);
  EXPECT_NE(Value(text, "reverb_process_resident_memory_bytes", ""), "0");

  table->Reset();
  const std::string reset = RenderMetrics(**service);
  EXPECT_EQ(Value(reset, "reverb_table_chunks", t), "0");
  EXPECT_EQ(Value(reset, "reverb_table_chunk_bytes", t), "0");
  EXPECT_EQ(Value(reset, "reverb_table_inserts_total", t), "0");
}

TEST(RenderMetricsTest, BlockedRequests) {
  // Inserts may lead samples by at most one.
  auto table = MakeTable("t", 100, 1);
  auto service = ReverbServiceImpl::Create({table});
  ASSERT_TRUE(service.ok());
  // Nothing to sample: held back, then timed out.
  EXPECT_FALSE(table->Sample(absl::Milliseconds(50)).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1)).ok());
  // The second waits for a sample.
  EXPECT_FALSE(table->InsertOrAssign(MakeItem(2), absl::Milliseconds(50)).ok());
  ASSERT_TRUE(table->Sample().ok());
  ASSERT_TRUE(testing::WaitFor([&] { return table->size() == 2; }));

  const std::string text = RenderMetrics(**service);
  const std::string t = "table=\"t\"";
  EXPECT_EQ(Value(text, "reverb_table_samples_blocked_total", t), "1");
  EXPECT_EQ(Value(text, "reverb_table_inserts_blocked_total", t), "1");
  EXPECT_EQ(Value(text, "reverb_table_rate_limiter_max_diff", t), "1");
  EXPECT_EQ(Value(text, "reverb_table_rate_limiter_min_diff", t), "-1");
  EXPECT_GT(
      std::stod(Value(text, "reverb_table_insert_blocked_seconds_total", t)),
      0.02);
  EXPECT_GT(
      std::stod(Value(text, "reverb_table_sample_blocked_seconds_total", t)),
      0.02);
}

}  // namespace
}  // namespace deepmind::reverb
