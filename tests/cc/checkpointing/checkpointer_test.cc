#include "cc/checkpointing/checkpointer.h"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cc/checkpointing/record_io.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/heap.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"
#include "gtest/gtest.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

namespace fs = std::filesystem;
using ::deepmind::reverb::testing::MakeItem;

using SelectorFactory = std::function<std::unique_ptr<ItemSelector>()>;

std::shared_ptr<Table> MakeTable(const std::string& name,
                                 const SelectorFactory& sampler,
                                 int64_t max_size = 100) {
  return *Table::Create(name, sampler(), std::make_unique<FifoSelector>(),
                        max_size, 0, *MinSizeRateLimiter(1));
}

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("reverb_checkpointer_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A table of items 1..5 with priorities 1..5, items 1 and 2 sampled.
  std::shared_ptr<Table> Filled(const SelectorFactory& sampler) {
    auto table = MakeTable("t", sampler);
    for (uint64_t key = 1; key <= 5; ++key) {
      EXPECT_TRUE(table->InsertOrAssign(MakeItem(key, key, key)).ok());
    }
    EXPECT_TRUE(table->MutateItems({}, {}).ok());
    return table;
  }

  fs::path root_;
};

struct SelectorCase {
  std::string name;
  SelectorFactory make;
  uint64_t first_sample;  // After the restore.
};

TEST_F(CheckpointerTest, RoundTripKeepsItemsOrderAndCounters) {
  std::vector<SelectorCase> cases = {
      {"fifo", [] { return std::make_unique<FifoSelector>(); }, 1},
      {"lifo", [] { return std::make_unique<LifoSelector>(); }, 5},
      {"min_heap", [] { return std::make_unique<HeapSelector>(true); }, 1},
      {"max_heap", [] { return std::make_unique<HeapSelector>(false); }, 5},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto table = Filled(c.make);
    ASSERT_TRUE(table->Sample().ok());
    Checkpointer checkpointer((root_ / c.name).string());
    auto path = checkpointer.Save({table});
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_TRUE(fs::exists(fs::path(*path) / "DONE"));
    EXPECT_TRUE(fs::exists(fs::path(*path) / "chunks.tfrecord"));

    // Restored into a table of other options: the checkpoint's win.
    auto restored = MakeTable(
        "t", [] { return std::make_unique<UniformSelector>(); }, 7);
    ASSERT_TRUE(checkpointer.LoadLatest({restored}).ok());
    const TableInfo before = table->info();
    const TableInfo after = restored->info();
    EXPECT_EQ(after.current_size(), 5);
    EXPECT_EQ(after.max_size(), 100);
    EXPECT_EQ(after.sampler_options().SerializeAsString(),
              before.sampler_options().SerializeAsString());
    EXPECT_EQ(after.rate_limiter_info().insert_stats().completed(), 5);
    EXPECT_EQ(after.rate_limiter_info().sample_stats().completed(), 1);
    EXPECT_EQ(after.num_episodes(), 5);
    EXPECT_EQ(after.num_unique_samples(), 1);
    for (uint64_t key = 1; key <= 5; ++key) {
      auto item = restored->Get(key);
      ASSERT_TRUE(item.ok());
      EXPECT_EQ(item->priority(), key);
      EXPECT_EQ(item->times_sampled(), table->Get(key)->times_sampled());
    }
    auto sample = restored->Sample();
    ASSERT_TRUE(sample.ok());
    EXPECT_EQ(sample->ref->item.key(), c.first_sample);
  }
}

TEST_F(CheckpointerTest, PrioritizedKeepsUpdatedPriorities) {
  auto table =
      Filled([] { return std::make_unique<PrioritizedSelector>(1.0); });
  KeyWithPriority update;
  update.set_key(3);
  update.set_priority(0);
  ASSERT_TRUE(table->MutateItems({update}, {4}).ok());
  Checkpointer checkpointer(root_.string());
  ASSERT_TRUE(checkpointer.Save({table}).ok());
  auto restored =
      MakeTable("t", [] { return std::make_unique<UniformSelector>(); });
  ASSERT_TRUE(checkpointer.LoadLatest({restored}).ok());
  EXPECT_EQ(restored->size(), 4);
  EXPECT_EQ(restored->Get(3)->priority(), 0);
  EXPECT_FALSE(restored->Get(4).ok());
  for (int i = 0; i < 50; ++i)
    EXPECT_NE(restored->Sample()->ref->item.key(), 3u);
}

TEST_F(CheckpointerTest, ServerOptionsOnRequest) {
  auto table = Filled([] { return std::make_unique<FifoSelector>(); });
  CheckpointerOptions options;
  options.use_checkpoint_table_options = false;
  Checkpointer checkpointer(root_.string(), "", std::nullopt, options);
  ASSERT_TRUE(checkpointer.Save({table}).ok());
  // A smaller table: its Fifo remover evicts the oldest items.
  auto smaller = MakeTable(
      "t", [] { return std::make_unique<LifoSelector>(); }, 3);
  ASSERT_TRUE(checkpointer.LoadLatest({smaller}).ok());
  const TableInfo info = smaller->info();
  EXPECT_EQ(info.max_size(), 3);
  EXPECT_TRUE(info.sampler_options().lifo());
  EXPECT_EQ(info.current_size(), 3);
  EXPECT_FALSE(smaller->Get(2).ok());
  EXPECT_TRUE(smaller->Get(3).ok());
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(), 5);
  EXPECT_EQ(smaller->Sample()->ref->item.key(), 5u);
}

TEST_F(CheckpointerTest, KeepLatestAndCrashLeftovers) {
  auto table = Filled([] { return std::make_unique<FifoSelector>(); });
  Checkpointer checkpointer(root_.string());
  fs::create_directories(root_ / ".2000-01-01T00:00:00.000000+00:00.tmp");
  fs::create_directories(root_ /
                         "2000-01-01T00:00:00.000000+00:00");  // No DONE.
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) paths.push_back(*checkpointer.Save({table}, 2));
  EXPECT_FALSE(fs::exists(paths[0]));
  EXPECT_TRUE(fs::exists(paths[1]) && fs::exists(paths[2]));
  EXPECT_FALSE(fs::exists(root_ / ".2000-01-01T00:00:00.000000+00:00.tmp"));
  EXPECT_EQ(checkpointer.Save({table}, 0).status().ok(), true);
}

TEST_F(CheckpointerTest, CorruptNewestFallsBackToOlder) {
  auto table = Filled([] { return std::make_unique<FifoSelector>(); });
  Checkpointer checkpointer(root_.string(), "", std::nullopt, {3, 1, true});
  const std::string older = *checkpointer.Save({table});
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(6, 1.0, 6)).ok());
  const std::string newer = *checkpointer.Save({table});
  const fs::path chunks = fs::path(newer) / "chunks.tfrecord";
  fs::resize_file(chunks, fs::file_size(chunks) / 2);

  auto restored =
      MakeTable("t", [] { return std::make_unique<FifoSelector>(); });
  absl::Status direct = checkpointer.Load(newer, {restored});
  EXPECT_TRUE(absl::IsDataLoss(direct)) << direct;
  EXPECT_NE(direct.message().find("chunks.tfrecord"), std::string::npos);
  EXPECT_EQ(restored->size(), 0);  // Nothing changed.
  ASSERT_TRUE(checkpointer.LoadLatest({restored}).ok());
  EXPECT_EQ(restored->size(), 5);  // The older checkpoint.

  // A missing DONE makes a checkpoint invisible.
  fs::remove(fs::path(older) / "DONE");
  auto empty = MakeTable("t", [] { return std::make_unique<FifoSelector>(); });
  EXPECT_TRUE(absl::IsDataLoss(checkpointer.LoadLatest({empty})));
  fs::remove(fs::path(newer) / "DONE");
  EXPECT_TRUE(absl::IsNotFound(checkpointer.LoadLatest({empty})));
}

TEST_F(CheckpointerTest, ChunkRecordThatIsNotAChunkIsDataLoss) {
  auto table = Filled([] { return std::make_unique<FifoSelector>(); });
  Checkpointer checkpointer(root_.string(), "", std::nullopt, {3, 1, true});
  const std::string path = *checkpointer.Save({table});
  {
    auto writer =
        *RecordWriter::Create((fs::path(path) / "chunks.tfrecord").string(), 1);
    ASSERT_TRUE(writer->Write("\x08").ok());  // A tag without its value.
    ASSERT_TRUE(writer->Close().ok());
  }
  auto restored =
      MakeTable("t", [] { return std::make_unique<FifoSelector>(); });
  absl::Status status = checkpointer.Load(path, {restored});
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find("deepmind.reverb.ChunkData"),
            std::string::npos)
      << status;
  EXPECT_EQ(restored->size(), 0);
}

TEST_F(CheckpointerTest, TableThatRefusesItsPartResetsTheTablesBefore) {
  const auto fifo = [] { return std::make_unique<FifoSelector>(); };
  std::vector<std::shared_ptr<Table>> tables = {MakeTable("a", fifo),
                                                MakeTable("b", fifo)};
  for (uint64_t key = 1; key <= 4; ++key) {
    TableItem item = MakeItem(key);
    item.item.set_table(tables[key % 2]->name());
    ASSERT_TRUE(tables[key % 2]->InsertOrAssign(std::move(item)).ok());
  }
  Checkpointer checkpointer(root_.string());
  const std::string path = *checkpointer.Save(tables);
  // Table b's rate limiter, as a corrupt (but checksummed) file may hold it.
  const std::string tables_file = (fs::path(path) / "tables.tfrecord").string();
  std::vector<PriorityTableCheckpoint> checkpoints;
  {
    auto reader = *RecordReader::Open(tables_file);
    for (auto record = reader->Read(); record.ok(); record = reader->Read()) {
      ASSERT_TRUE(checkpoints.emplace_back().ParseFromString(*record));
    }
  }
  ASSERT_EQ(checkpoints.size(), 2u);
  ASSERT_EQ(checkpoints[1].table_name(), "b");
  checkpoints[1].mutable_rate_limiter()->set_samples_per_insert(0);
  {
    auto writer = *RecordWriter::Create(tables_file, 1);
    for (const auto& checkpoint : checkpoints) {
      ASSERT_TRUE(writer->Write(checkpoint.SerializeAsString()).ok());
    }
    ASSERT_TRUE(writer->Close().ok());
  }
  std::vector<std::shared_ptr<Table>> restored = {MakeTable("a", fifo),
                                                  MakeTable("b", fifo)};
  const absl::Status status = checkpointer.Load(path, restored);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(restored[0]->size(), 0);
  EXPECT_EQ(restored[1]->size(), 0);
}

TEST_F(CheckpointerTest, UnknownTableAndFallback) {
  auto table = Filled([] { return std::make_unique<FifoSelector>(); });
  Checkpointer checkpointer(root_.string());
  const std::string path = *checkpointer.Save({table});
  auto other =
      MakeTable("other", [] { return std::make_unique<FifoSelector>(); });
  absl::Status status = checkpointer.LoadLatest({other});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("other"), std::string::npos);

  Checkpointer fresh((root_ / "elsewhere").string(), "", path);
  auto restored =
      MakeTable("t", [] { return std::make_unique<FifoSelector>(); });
  EXPECT_TRUE(absl::IsNotFound(fresh.LoadLatest({restored})));
  ASSERT_TRUE(fresh.LoadFallbackCheckpoint({restored}).ok());
  EXPECT_EQ(restored->size(), 5);
  EXPECT_TRUE(absl::IsInvalidArgument(
      Checkpointer(root_.string(), "group").Save({table}).status()));
}

}  // namespace
}  // namespace deepmind::reverb
