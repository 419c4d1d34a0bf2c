// The in-process path for inserts: writers of a server in this process
// hand their chunks and items to its tables (LocalInsertStream), and what
// they insert reads back the same over gRPC, directly and from a
// checkpoint.
#include "cc/client/local_insert_stream.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cc/checkpointing/checkpointer.h"
#include "cc/client/local_sample_stream.h"
#include "cc/client/sample_stream.h"
#include "cc/client/trajectory_writer.h"
#include "cc/rate_limiters/presets.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

namespace fs = std::filesystem;
using testing::FifoTable;
using testing::Int32;
using testing::Values;

class LocalInsertStreamTest : public testing::ConnectedServerTest {
 protected:
  void StartServer(std::vector<std::shared_ptr<Table>> tables) {
    ConnectedServerTest::StartServer(std::move(tables));
    if (HasFatalFailure()) return;
    ASSERT_TRUE(connection_->WaitForConnection(absl::Seconds(30)).ok());
  }

  std::unique_ptr<TrajectoryWriter> NewWriter() {
    return *TrajectoryWriter::Create(
        connection_, std::make_shared<ConstantChunkerOptions>(1, 2));
  }

  // Writes items of one int32 step each, with values `values`.
  void Write(TrajectoryWriter& writer, const std::string& table,
             const std::vector<int32_t>& values) {
    for (int32_t value : values) {
      auto refs =
          writer.Append({std::optional<TensorView>(Int32({value}, {}))});
      ASSERT_TRUE(refs.ok()) << refs.status();
      ASSERT_TRUE(writer.CreateItem(table, 1.0, {{{*(*refs)[0]}}}).ok());
    }
    ASSERT_TRUE(writer.Flush(0, absl::Seconds(30)).ok());
  }

  // Writes an item of `value` that the rate limiter of `table` holds back:
  // a flush times out.
  void WriteHeldBack(TrajectoryWriter& writer, const std::string& table,
                     int32_t value) {
    auto refs = writer.Append({std::optional<TensorView>(Int32({value}, {}))});
    ASSERT_TRUE(refs.ok());
    ASSERT_TRUE(writer.CreateItem(table, 1.0, {{{*(*refs)[0]}}}).ok());
    EXPECT_EQ(writer.Flush(0, absl::Milliseconds(100)).code(),
              absl::StatusCode::kDeadlineExceeded);
  }

  static std::vector<int32_t> SampleValues(SampleStreamInterface& stream,
                                           int n) {
    std::vector<int32_t> values;
    EXPECT_TRUE(stream.Request(n, absl::InfiniteDuration()).ok());
    for (int i = 0; i < n; ++i) {
      auto sample = stream.Read();
      EXPECT_TRUE(sample.ok()) << sample.status();
      if (!sample.ok()) break;
      values.push_back(Values<int32_t>(sample->columns[0])[0]);
    }
    return values;
  }
};

TEST_F(LocalInsertStreamTest, WritersHandTheirChunksOverWithoutACopy) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  auto writer = NewWriter();
  Write(*writer, "t", {1, 2, 3});
  EXPECT_EQ(table->info().num_local_inserts(), 3);
  Table::CheckpointData data = table->Checkpoint();
  ASSERT_EQ(data.chunks.size(), 3);
  for (const auto& chunk : data.chunks) {
    EXPECT_NE(chunk->proto(), nullptr);  // The writer's ChunkData itself.
    EXPECT_TRUE(chunk->wire().empty());
  }
}

TEST_F(LocalInsertStreamTest, ChunksHandedOverReadTheSameOverGrpc) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1), 1000, 1);
  StartServer({table});
  Write(*NewWriter(), "t", {1, 2, 3, 4});
  SampleStream over_grpc(connection_, "t");
  EXPECT_EQ(SampleValues(over_grpc, 2), (std::vector<int32_t>{1, 2}));
  LocalSampleStream local(connection_->LocalTable("t"));
  EXPECT_EQ(SampleValues(local, 2), (std::vector<int32_t>{3, 4}));
}

TEST_F(LocalInsertStreamTest, ChunksHandedOverAreCheckpointedAndLoadBack) {
  const fs::path root =
      fs::temp_directory_path() /
      ("reverb_local_insert_test_" + std::to_string(getpid()));
  fs::remove_all(root);
  auto table = FifoTable("t", *MinSizeRateLimiter(1), 1000, 1);
  StartServer({table});
  Write(*NewWriter(), "t", {7, 8});
  Checkpointer checkpointer(root.string());
  auto path = checkpointer.Save({table});
  ASSERT_TRUE(path.ok()) << path.status();
  auto restored = FifoTable("t", *MinSizeRateLimiter(1), 1000, 1);
  ASSERT_TRUE(checkpointer.Load(*path, {restored}).ok());
  LocalSampleStream stream(restored);
  EXPECT_EQ(SampleValues(stream, 2), (std::vector<int32_t>{7, 8}));
  fs::remove_all(root);
}

TEST_F(LocalInsertStreamTest, RateLimiterHoldsConfirmationsBack) {
  // A queue of one: the second item waits for a sample.
  auto table = FifoTable("q", *QueueRateLimiter(1), 1);
  StartServer({table});
  auto writer = NewWriter();
  Write(*writer, "q", {1});
  ASSERT_NO_FATAL_FAILURE(WriteHeldBack(*writer, "q", 2));
  LocalSampleStream stream(connection_->LocalTable("q"));
  EXPECT_EQ(SampleValues(stream, 1), std::vector<int32_t>{1});
  EXPECT_TRUE(writer->Flush(0, absl::Seconds(30)).ok());
  EXPECT_EQ(SampleValues(stream, 1), std::vector<int32_t>{2});
}

TEST_F(LocalInsertStreamTest, ACancelledStreamWithdrawsItsQueuedItems) {
  // A queue of one: the second item waits for a sample, then the writer
  // goes without it confirmed; as over gRPC, the table never stores it.
  auto table = FifoTable("q", *QueueRateLimiter(1), 1, 1);
  StartServer({table});
  {
    auto writer = NewWriter();
    Write(*writer, "q", {1});
    ASSERT_NO_FATAL_FAILURE(WriteHeldBack(*writer, "q", 2));
  }
  LocalSampleStream stream(connection_->LocalTable("q"));
  EXPECT_EQ(SampleValues(stream, 1), std::vector<int32_t>{1});
  // Room for the worker to insert it, were it kept.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->info().num_local_inserts(), 2);
  EXPECT_EQ(table->info().rate_limiter_info().insert_stats().completed(), 1);
}

TEST_F(LocalInsertStreamTest, AServerThatStopsEndsTheStream) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  std::vector<uint64_t> confirmed;
  bool ended = false;
  auto stream = InsertStream::Open(
      connection_, absl::Seconds(30),
      [&](absl::Span<const uint64_t> keys) {
        confirmed.insert(confirmed.end(), keys.begin(), keys.end());
      },
      [&] { ended = true; });
  ASSERT_TRUE(stream.ok());
  ASSERT_NE(dynamic_cast<LocalInsertStream*>(stream->get()), nullptr);
  server_->Stop();
  ChunkData chunk = testing::MakeChunkData(100);
  InsertStreamRequest request;
  *request.add_items() = testing::MakePrioritizedItem(1, "t", 100);
  (*stream)->Write(request, {std::make_shared<const ChunkData>(chunk)},
                   InsertStream::Then::kMoreChunksFollow);
  // As a call to a server that has gone: writers reopen.
  EXPECT_EQ((*stream)->Finish().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(ended);
  EXPECT_TRUE(confirmed.empty());
}

}  // namespace
}  // namespace deepmind::reverb
