// The legacy Writer over its InsertStream, against a real server on
// loopback: what reaches the table, flushing and closing with a timeout,
// and the server's errors.
#include "cc/client/legacy_writer.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "cc/wire/grpc_status.h"
#include "gtest/gtest.h"
#include "tests/cc/client/writer_test_util.h"

namespace deepmind::reverb {
namespace {

using ::deepmind::reverb::testing::FifoTable;
using ::deepmind::reverb::testing::Int32;
using ::deepmind::reverb::testing::kOneAwaitingConfirmation;
using ::deepmind::reverb::testing::StoredItems;

class LegacyWriterTest : public testing::ConnectedServerTest {
 protected:
  std::unique_ptr<Writer> NewWriter(int chunk_length, int max_timesteps) {
    WriterOptions options;
    options.chunk_length = chunk_length;
    options.max_timesteps = max_timesteps;
    return *Writer::Create(connection_, options);
  }

  // A step of one int32 scalar column.
  static std::vector<Tensor> Step(int32_t value) {
    return {Int32({value}, {})};
  }
};

TEST_F(LegacyWriterTest, ItemsReachTheTableWithTheirChunksAndPriorities) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  auto writer = NewWriter(/*chunk_length=*/2, /*max_timesteps=*/4);
  for (int32_t t = 0; t < 5; ++t) {
    ASSERT_TRUE(writer->Append(Step(t)).ok());
    // Steps 0-1 (sent at once, its chunk is complete); then steps 2-4 and
    // step 4 alone, sent when Close() chunks step 4.
    if (t == 1) ASSERT_TRUE(writer->CreateItem("t", 2, 1.5).ok());
  }
  ASSERT_TRUE(writer->CreateItem("t", 3, 0.5).ok());
  ASSERT_TRUE(writer->CreateItem("t", 1, 2).ok());
  ASSERT_TRUE(writer->Close(absl::Seconds(30)).ok());

  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 3);
  EXPECT_EQ(stored[0].item.priority(), 1.5);
  EXPECT_EQ(stored[0].columns, (std::vector<std::vector<int32_t>>{{0, 1}}));
  ASSERT_EQ(stored[0].chunks.size(), 1);
  EXPECT_EQ(stored[0].chunks[0].sequence_range().start(), 0);
  EXPECT_EQ(stored[0].chunks[0].sequence_range().end(), 1);

  EXPECT_EQ(stored[1].item.priority(), 0.5);
  EXPECT_EQ(stored[1].columns, (std::vector<std::vector<int32_t>>{{2, 3, 4}}));
  ASSERT_EQ(stored[1].chunks.size(), 2);
  EXPECT_EQ(stored[1].chunks[0].sequence_range().start(), 2);
  EXPECT_EQ(stored[1].chunks[0].sequence_range().end(), 3);
  EXPECT_EQ(stored[1].chunks[1].sequence_range().start(), 4);
  EXPECT_EQ(stored[1].chunks[1].sequence_range().end(), 4);

  EXPECT_EQ(stored[2].item.priority(), 2);
  EXPECT_EQ(stored[2].columns, (std::vector<std::vector<int32_t>>{{4}}));
  // The chunk of step 4, sent once with the item before.
  EXPECT_EQ(stored[2].chunk_keys,
            (std::vector<uint64_t>{stored[1].chunk_keys[1]}));
  // One episode.
  for (const auto& item : stored) {
    for (const ChunkData& chunk : item.chunks) {
      EXPECT_EQ(chunk.sequence_range().episode_id(),
                stored[0].chunks[0].sequence_range().episode_id());
    }
  }
}

TEST_F(LegacyWriterTest, StepsAppendedAsViewsAreStoredAsTheyWereAppended) {
  // AppendViews compresses a step that is a chunk on its own straight from
  // the caller's memory and copies one that waits for the rest of its
  // chunk: either way, what the caller writes there afterwards must not
  // reach the table.
  for (const int chunk_length : {1, 3}) {
    SCOPED_TRACE(chunk_length);
    auto table = FifoTable("t", *MinSizeRateLimiter(1));
    StartServer({table});
    auto writer = NewWriter(chunk_length, /*max_timesteps=*/chunk_length);
    Tensor cell = Int32(std::vector<int32_t>(1024), {1024});
    const TensorView view = cell;
    auto fill = [&](int32_t value) {
      const std::vector<int32_t> values(1024, value);
      std::memcpy(cell.bytes.data(), values.data(), cell.bytes.size());
    };
    for (int32_t t = 0; t < 6; ++t) {
      fill(t);
      ASSERT_TRUE(writer->AppendViews({view}).ok());
      ASSERT_TRUE(writer->CreateItem("t", 1, 1).ok());
      fill(-1);
    }
    ASSERT_TRUE(writer->Close(absl::Seconds(30)).ok());
    auto stored = StoredItems(*table);
    ASSERT_EQ(stored.size(), 6);
    for (int32_t t = 0; t < 6; ++t) {
      EXPECT_EQ(
          stored[t].columns,
          (std::vector<std::vector<int32_t>>{std::vector<int32_t>(1024, t)}));
      ASSERT_EQ(stored[t].chunks.size(), 1);
      const ChunkData& chunk = stored[t].chunks[0];
      EXPECT_EQ(chunk.sequence_range().end() - chunk.sequence_range().start(),
                chunk_length - 1);
      EXPECT_EQ(chunk.data_uncompressed_size(), 4096 * chunk_length);
    }
    server_->Stop();
  }
}

TEST_F(LegacyWriterTest, AppendViewsRefusesWhatAppendRefuses) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto writer = NewWriter(1, 1);
  const Tensor one = Int32({1}, {});
  ASSERT_TRUE(writer->AppendViews({one}).ok());
  const absl::Status status = writer->AppendViews({one, one});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "Number of tensors per timestep was inconsistent. Previously it "
            "was 1, but is now 2.");
  ASSERT_TRUE(writer->Close(absl::Seconds(30)).ok());
  EXPECT_EQ(writer->AppendViews({one}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LegacyWriterTest, InsertStepStoresAnItemPerTableBeforeItReturns) {
  // Client.insert's call. One item in flight at most: the second item
  // waits for the first one's confirmation, which needs the request the
  // call writes itself.
  auto t = FifoTable("t", *MinSizeRateLimiter(1));
  auto u = FifoTable("u", *MinSizeRateLimiter(1));
  StartServer({t, u});
  WriterOptions options;
  options.max_in_flight_items = 1;
  auto writer = *Writer::Create(connection_, options);
  for (int32_t step = 0; step < 3; ++step) {
    const Tensor cell = Int32({step}, {});
    ASSERT_TRUE(
        writer->InsertStep({TensorView(cell)}, {{"t", 1.5}, {"u", 2}}).ok());
    EXPECT_EQ(t->size(), step + 1);
    EXPECT_EQ(u->size(), step + 1);
    ASSERT_TRUE(writer->NewEpisode().ok());
  }
  // An error after the first item: that item is stored all the same.
  const Tensor cell = Int32({7}, {});
  const absl::Status status =
      writer->InsertStep({TensorView(cell)}, {{"t", 1}, {"u", std::nan("")}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "`priority` must not be nan.");
  // The sender writes what comes next as before.
  ASSERT_TRUE(writer->Append(Step(8)).ok());
  ASSERT_TRUE(writer->CreateItem("u", 1, 3).ok());
  ASSERT_TRUE(writer->Close(absl::Seconds(30)).ok());

  auto stored_t = StoredItems(*t);
  ASSERT_EQ(stored_t.size(), 4);
  for (int32_t step = 0; step < 3; ++step) {
    EXPECT_EQ(stored_t[step].item.priority(), 1.5);
    EXPECT_EQ(stored_t[step].columns,
              (std::vector<std::vector<int32_t>>{{step}}));
  }
  EXPECT_EQ(stored_t[3].columns, (std::vector<std::vector<int32_t>>{{7}}));
  auto stored_u = StoredItems(*u);
  ASSERT_EQ(stored_u.size(), 4);
  EXPECT_EQ(stored_u[0].item.priority(), 2);
  EXPECT_EQ(stored_u[3].item.priority(), 3);
  EXPECT_EQ(stored_u[3].columns, (std::vector<std::vector<int32_t>>{{8}}));
}

TEST_F(LegacyWriterTest, FlushTimesOutWhileTheTableHoldsAnItemBack) {
  // A queue of one: the second item waits until the first is sampled.
  auto table = FifoTable("q", *QueueRateLimiter(1), 1);
  StartServer({table});
  auto writer = NewWriter(1, 1);
  ASSERT_TRUE(writer->Append(Step(1)).ok());
  ASSERT_TRUE(writer->CreateItem("q", 1, 1).ok());
  ASSERT_TRUE(writer->Flush(absl::Seconds(30)).ok());
  ASSERT_TRUE(writer->Append(Step(2)).ok());
  ASSERT_TRUE(writer->CreateItem("q", 1, 1).ok());
  absl::Status flush = writer->Flush(absl::Milliseconds(300));
  EXPECT_EQ(flush.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(flush.message(), kOneAwaitingConfirmation);

  // The timeout is not the writer's error: once the table takes the item,
  // the writer flushes and closes.
  ASSERT_TRUE(table->Sample(absl::Seconds(30)).ok());
  EXPECT_TRUE(writer->Flush(absl::Seconds(30)).ok());
  EXPECT_TRUE(writer->Close(absl::Seconds(30)).ok());
  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 1);
  EXPECT_EQ(stored[0].columns, (std::vector<std::vector<int32_t>>{{2}}));
}

TEST_F(LegacyWriterTest, CloseTimesOutAndClosesTheWriter) {
  auto table = FifoTable("q", *QueueRateLimiter(1), 1);
  StartServer({table});
  auto writer = NewWriter(1, 1);
  for (int32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(writer->Append(Step(i)).ok());
    ASSERT_TRUE(writer->CreateItem("q", 1, 1).ok());
    if (i == 0) ASSERT_TRUE(writer->Flush(absl::Seconds(30)).ok());
  }
  absl::Status close = writer->Close(absl::Milliseconds(300));
  EXPECT_EQ(close.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(close.message(), kOneAwaitingConfirmation);
  absl::Status append = writer->Append(Step(3));
  EXPECT_EQ(append.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(append.message(),
            "Calling method Append after Close has been called");
}

TEST_F(LegacyWriterTest, AnUnknownTableBecomesTheWritersError) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto writer = NewWriter(1, 1);
  ASSERT_TRUE(writer->Append(Step(1)).ok());
  ASSERT_TRUE(writer->CreateItem("nope", 1, 1).ok());
  for (const absl::Status& status :
       {writer->Flush(absl::Seconds(30)), writer->Append(Step(2)),
        writer->Close(absl::Seconds(30))}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(status.message(), "Priority table nope was not found");
  }
}

TEST_F(LegacyWriterTest, AServerThatStopsBecomesTheWritersError) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto writer = NewWriter(1, 1);
  ASSERT_TRUE(writer->Append(Step(1)).ok());
  ASSERT_TRUE(writer->CreateItem("t", 1, 1).ok());
  ASSERT_TRUE(writer->Flush(absl::Seconds(30)).ok());
  server_->Stop();
  ASSERT_TRUE(writer->Append(Step(2)).ok());
  absl::Status status = writer->CreateItem("t", 1, 1);
  if (status.ok()) status = writer->Flush(absl::Seconds(30));
  EXPECT_TRUE(IsTransientError(status)) << status;
  // Permanent: the legacy writer does not reconnect.
  EXPECT_EQ(writer->Append(Step(3)), status);
}

TEST_F(LegacyWriterTest, DestroyingAWriterDoesNotWaitForConfirmations) {
  StartServer({FifoTable("q", *QueueRateLimiter(1), 1)});
  auto writer = NewWriter(1, 1);
  for (int32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(writer->Append(Step(i)).ok());
    ASSERT_TRUE(writer->CreateItem("q", 1, 1).ok());
  }
  // The second item is never confirmed: a destructor that waited would hang.
  EXPECT_EQ(writer->Flush(absl::Milliseconds(100)).code(),
            absl::StatusCode::kDeadlineExceeded);
  writer.reset();
}

}  // namespace
}  // namespace deepmind::reverb
