// The TrajectoryWriter over its InsertStreams, against a real server on
// loopback: what reaches the table, flushing and ending episodes with a
// timeout, the server's errors and streaming again to a restarted server.
#include "cc/client/trajectory_writer.h"

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cc/client/writer_test_util.h"

namespace deepmind::reverb {
namespace {

using ::deepmind::reverb::testing::FifoTable;
using ::deepmind::reverb::testing::Int32;
using ::deepmind::reverb::testing::kOneAwaitingConfirmation;
using ::deepmind::reverb::testing::StoredItems;

class TrajectoryWriterTest : public testing::ConnectedServerTest {
 protected:
  std::unique_ptr<TrajectoryWriter> NewWriter(int max_chunk_length,
                                              int num_keep_alive_refs) {
    return *TrajectoryWriter::Create(
        connection_, std::make_shared<ConstantChunkerOptions>(
                         max_chunk_length, num_keep_alive_refs));
  }

  // Appends a step of one int32 scalar column; its cell.
  static std::weak_ptr<CellRef> Append(TrajectoryWriter& writer,
                                       int32_t value) {
    auto refs = writer.Append({std::optional<TensorView>(Int32({value}, {}))});
    EXPECT_TRUE(refs.ok()) << refs.status();
    return refs.ok() ? *(*refs)[0] : std::weak_ptr<CellRef>();
  }

  static uint64_t ChunkKey(const std::weak_ptr<CellRef>& cell) {
    return cell.lock()->chunk_key();
  }
};

TEST_F(TrajectoryWriterTest, ItemsReachTheTableWithTheirChunksAndPriorities) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  auto writer = NewWriter(/*max_chunk_length=*/2, /*num_keep_alive_refs=*/4);
  std::vector<std::weak_ptr<CellRef>> cells;
  for (int32_t t = 0; t < 4; ++t) cells.push_back(Append(*writer, t));
  ASSERT_TRUE(writer->CreateItem("t", 0.5, {{{cells[1], cells[2]}}}).ok());
  ASSERT_TRUE(writer->CreateItem("t", 3, {{{cells[3]}}}).ok());
  ASSERT_TRUE(writer->Flush(0, absl::Seconds(30)).ok());
  EXPECT_EQ(writer->num_pending_items(), 0);

  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 2);
  EXPECT_EQ(stored[0].item.priority(), 0.5);
  EXPECT_EQ(stored[0].columns, (std::vector<std::vector<int32_t>>{{1, 2}}));
  EXPECT_EQ(stored[0].chunk_keys,
            (std::vector<uint64_t>{ChunkKey(cells[1]), ChunkKey(cells[2])}));
  EXPECT_EQ(stored[1].item.priority(), 3);
  EXPECT_EQ(stored[1].columns, (std::vector<std::vector<int32_t>>{{3}}));
  EXPECT_EQ(stored[1].chunk_keys, (std::vector<uint64_t>{ChunkKey(cells[3])}));
  writer->Close();
}

TEST_F(TrajectoryWriterTest, CreateItemsQueuesShiftedItemsAllOrNone) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  auto writer = NewWriter(/*max_chunk_length=*/2, /*num_keep_alive_refs=*/5);
  std::vector<std::weak_ptr<CellRef>> cells;
  for (int32_t t = 0; t < 5; ++t) cells.push_back(Append(*writer, t));
  // Three items of two steps each (steps 1-2, 2-3, 3-4) and a squeezed
  // column of their first step.
  const std::vector<BatchColumn> columns = {
      {{cells[1], cells[2], cells[3], cells[4]}, {0, 1}, false},
      {{cells[1], cells[2], cells[3]}, {0}, true}};
  // Too few refs for four items; a NaN priority of the third: no item.
  EXPECT_EQ(writer->CreateItems("t", {1, 2, 3, 4}, columns).message(),
            "Offset 1 of column 0 needs 4 refs from it, but the column has 4.");
  EXPECT_EQ(writer->CreateItems("t", {1, 2, NAN}, columns).message(),
            "`priority` must not be nan.");
  EXPECT_EQ(writer->num_pending_items(), 0);
  ASSERT_TRUE(writer->CreateItems("t", {1, 2, 3}, columns).ok());
  ASSERT_TRUE(writer->Flush(0, absl::Seconds(30)).ok());

  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(stored[i].item.priority(), i + 1);
    EXPECT_EQ(stored[i].columns,
              (std::vector<std::vector<int32_t>>{{i + 1, i + 2}, {i + 1}}));
    EXPECT_TRUE(stored[i].item.flat_trajectory().columns(1).squeeze());
  }
  writer->Close();
}

TEST_F(TrajectoryWriterTest, FlushAndEndEpisodeTimeOutWhileTheTableHoldsBack) {
  // A queue of one: the second item waits until the first is sampled.
  auto table = FifoTable("q", *QueueRateLimiter(1), 1);
  StartServer({table});
  auto writer = NewWriter(1, 1);
  ASSERT_TRUE(writer->CreateItem("q", 1, {{{Append(*writer, 1)}}}).ok());
  ASSERT_TRUE(writer->Flush(0, absl::Seconds(30)).ok());
  ASSERT_TRUE(writer->CreateItem("q", 1, {{{Append(*writer, 2)}}}).ok());

  for (const absl::Status& status :
       {writer->Flush(0, absl::Seconds(1)),
        writer->EndEpisode(/*clear_buffers=*/true, absl::Seconds(1))}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(status.message(), kOneAwaitingConfirmation);
  }
  EXPECT_EQ(writer->episode_steps(), 2);  // The episode did not end.
  EXPECT_EQ(writer->num_pending_items(), 1);

  ASSERT_TRUE(table->Sample(absl::Seconds(30)).ok());
  ASSERT_TRUE(writer->EndEpisode(true, absl::Seconds(30)).ok());
  EXPECT_EQ(writer->episode_steps(), 0);
  EXPECT_EQ(writer->num_pending_items(), 0);
  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 1);
  EXPECT_EQ(stored[0].columns, (std::vector<std::vector<int32_t>>{{2}}));
  writer->Close();
}

TEST_F(TrajectoryWriterTest, AnUnknownTableBecomesTheWritersError) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto writer = NewWriter(1, 1);
  ASSERT_TRUE(writer->CreateItem("nope", 1, {{{Append(*writer, 1)}}}).ok());
  for (const absl::Status& status :
       {writer->Flush(0, absl::Seconds(30)),
        writer->Append({std::optional<TensorView>(Int32({2}, {}))}).status(),
        writer->EndEpisode(true)}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(status.message(), "Priority table nope was not found");
  }
  writer->Close();
}

TEST_F(TrajectoryWriterTest, StreamsAgainToARestartedServer) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  const int port = server_->port();
  auto writer = NewWriter(/*max_chunk_length=*/1, /*num_keep_alive_refs=*/2);
  auto first = Append(*writer, 1);
  ASSERT_TRUE(writer->CreateItem("t", 1, {{{first}}}).ok());
  ASSERT_TRUE(writer->Flush(0, absl::Seconds(30)).ok());

  // The server cancels the stream as it stops (a transient error); the
  // writer streams again once a server is back, within kConnectTimeout.
  server_->Stop();
  server_.reset();
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table}, port);
  // Its chunk went out on the old stream only: the new one needs it too.
  ASSERT_TRUE(writer->CreateItem("t", 2, {{{first}}}).ok());
  ASSERT_TRUE(writer->CreateItem("t", 3, {{{first, Append(*writer, 2)}}}).ok());
  absl::Status flush = writer->Flush(0, absl::Seconds(60));
  ASSERT_TRUE(flush.ok()) << flush;

  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 2);
  EXPECT_EQ(stored[0].item.priority(), 2);
  EXPECT_EQ(stored[0].columns, (std::vector<std::vector<int32_t>>{{1}}));
  EXPECT_EQ(stored[1].item.priority(), 3);
  EXPECT_EQ(stored[1].columns, (std::vector<std::vector<int32_t>>{{1, 2}}));
  writer->Close();
}

TEST_F(TrajectoryWriterTest, QueuedItemsKeepTheStreamedChunksTheyReferTo) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  const int port = server_->port();
  server_->Stop();
  server_.reset();
  // Column 0 in chunks of one step, kept alive for two; column 1 in chunks
  // of four steps.
  auto writer = NewWriter(/*max_chunk_length=*/1, /*num_keep_alive_refs=*/2);
  ASSERT_TRUE(
      writer
          ->ConfigureChunker(1, std::make_shared<ConstantChunkerOptions>(4, 4))
          .ok());
  auto append = [&writer](int32_t value) {
    auto refs = writer->Append({std::optional<TensorView>(Int32({value}, {})),
                                std::optional<TensorView>(Int32({value}, {}))});
    EXPECT_TRUE(refs.ok()) << refs.status();
    return *std::move(refs);
  };
  // With no server, both items wait; the second until column 1's chunk is
  // finalized.
  auto step0 = append(0);
  ASSERT_TRUE(writer->CreateItem("t", 1, {{{*step0[0]}}}).ok());
  ASSERT_TRUE(writer->CreateItem("t", 2, {{{*step0[0]}}, {{*step0[1]}}}).ok());
  // Column 0's chunkers no longer keep step 0 alive: only the waiting item
  // refers to its chunk.
  append(1);
  append(2);
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table}, port);
  // The first item streams step 0's chunk; the server is asked to keep it
  // for the second (sent once step 3 finalizes column 1's chunk), which
  // then refers to it without sending it again.
  absl::Status flush = writer->Flush(1, absl::Seconds(60));
  ASSERT_TRUE(flush.ok()) << flush;
  EXPECT_EQ(writer->num_streamed_chunks(), 1);
  append(3);
  flush = writer->Flush(0, absl::Seconds(60));
  ASSERT_TRUE(flush.ok()) << flush;
  // Once no item waits for it, step 0's chunk is let go; column 1's chunk,
  // which its chunker keeps alive, stays.
  EXPECT_EQ(writer->num_streamed_chunks(), 1);

  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 2);
  EXPECT_EQ(stored[0].columns, (std::vector<std::vector<int32_t>>{{0}}));
  EXPECT_EQ(stored[1].columns, (std::vector<std::vector<int32_t>>{{0}, {0}}));
  writer->Close();
}

}  // namespace
}  // namespace deepmind::reverb
