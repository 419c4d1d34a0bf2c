// SampleStream against a real server on loopback, whose tables the tests
// fill directly.
#include "cc/client/sample_stream.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "cc/client/connection.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/prioritized.h"
#include "cc/service/server.h"
#include "gtest/gtest.h"
#include "tests/cc/client/freezable_proxy.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::FifoTable;
using testing::MakeInt32Item;
using testing::Values;
using testing::WaitFor;

constexpr absl::Duration kNever = absl::InfiniteDuration();

class SampleStreamTest : public testing::ConnectedServerTest {
 protected:
  void StartServer(std::vector<std::shared_ptr<Table>> tables) {
    ConnectedServerTest::StartServer(std::move(tables));
    if (HasFatalFailure()) return;
    ASSERT_TRUE(connection_->WaitForConnection(absl::Seconds(30)).ok());
  }

  static void Insert(Table& table, uint64_t key, double priority,
                     int32_t value) {
    ASSERT_TRUE(table
                    .InsertOrAssign(MakeInt32Item(key, priority, value),
                                    absl::Seconds(30))
                    .ok());
  }
};

TEST_F(SampleStreamTest, SamplesCarryTheirDataAndInfo) {
  // Each item is sampled once, oldest first.
  auto table =
      FifoTable("queue", *MinSizeRateLimiter(1), 1000, /*max_times_sampled=*/1);
  StartServer({table});
  Insert(*table, 1, 1.5, 10);
  Insert(*table, 2, 2.5, 20);
  Insert(*table, 3, 3.5, 30);

  SampleStream stream(connection_, "queue");
  ASSERT_TRUE(stream.Request(3, kNever).ok());
  EXPECT_EQ(stream.outstanding(), 3);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    auto sample = stream.Read();
    ASSERT_TRUE(sample.ok()) << sample.status();
    const PrioritizedItem& item = sample->info->item();
    EXPECT_EQ(item.key(), i + 1);
    EXPECT_EQ(item.priority(), i + 1.5);
    EXPECT_EQ(item.times_sampled(), 1);
    EXPECT_EQ(sample->info->table_size(), 3 - i);  // Before its removal.
    EXPECT_EQ(sample->info->probability(), 1.0);
    ASSERT_EQ(sample->columns.size(), 1);
    EXPECT_EQ(sample->columns[0].dtype, tensorflow::DT_INT32);
    EXPECT_EQ(sample->columns[0].shape, (std::vector<int64_t>{1}));
    EXPECT_EQ(Values<int32_t>(sample->columns[0]),
              (std::vector<int32_t>{10 * (i + 1)}));
    EXPECT_EQ(stream.outstanding(), 2 - i);
  }
  EXPECT_EQ(table->size(), 0);
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(SampleStreamTest, InfoHasTheCurrentPriorityTimesSampledAndProbability) {
  auto table = *Table::Create(
      "prioritized", std::make_unique<PrioritizedSelector>(1.0),
      std::make_unique<FifoSelector>(), 1000, 0, *MinSizeRateLimiter(1));
  StartServer({table});
  Insert(*table, 1, 1.0, 10);
  Insert(*table, 2, 3.0, 20);
  KeyWithPriority update;
  update.set_key(2);
  update.set_priority(4.0);
  ASSERT_TRUE(table->MutateItems({update}, {}).ok());

  SampleStream stream(connection_, "prioritized");
  ASSERT_TRUE(stream.Request(40, kNever).ok());
  int32_t times_sampled[3] = {0, 0, 0};
  for (int i = 0; i < 40; ++i) {
    auto sample = stream.Read();
    ASSERT_TRUE(sample.ok()) << sample.status();
    const PrioritizedItem& item = sample->info->item();
    ASSERT_TRUE(item.key() == 1 || item.key() == 2) << item.key();
    EXPECT_EQ(item.priority(), item.key() == 1 ? 1.0 : 4.0);
    EXPECT_DOUBLE_EQ(sample->info->probability(), item.priority() / 5.0);
    EXPECT_EQ(sample->info->table_size(), 2);
    EXPECT_EQ(item.times_sampled(), ++times_sampled[item.key()]);
    EXPECT_EQ(Values<int32_t>(sample->columns[0]),
              (std::vector<int32_t>{10 * static_cast<int32_t>(item.key())}));
  }
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(SampleStreamTest, ServesExactlyTheRequestedSamplesAndIsReused) {
  auto table = FifoTable("fifo", *MinSizeRateLimiter(1));
  StartServer({table});
  Insert(*table, 1, 1.0, 10);

  SampleStream stream(connection_, "fifo");
  int32_t read = 0;
  for (int64_t n : {2, 1, 5}) {
    ASSERT_TRUE(stream.Request(n, kNever).ok());
    for (int64_t i = 0; i < n; ++i) {
      auto sample = stream.Read();
      ASSERT_TRUE(sample.ok()) << sample.status();
      EXPECT_EQ(sample->info->item().times_sampled(), ++read);
    }
    EXPECT_EQ(stream.outstanding(), 0);
    EXPECT_FALSE(stream.has_buffered_entries());
  }
  EXPECT_TRUE(stream.ok());
  EXPECT_TRUE(stream.Close().ok());
  // The server sampled no more than was asked for.
  EXPECT_EQ(table->Get(1)->times_sampled(), 8);
}

TEST_F(SampleStreamTest, ReadPackedLeavesTheChunksToUnpack) {
  auto table = FifoTable("fifo", *MinSizeRateLimiter(1));
  StartServer({table});
  Insert(*table, 4, 1.0, 40);
  SampleStream stream(connection_, "fifo");
  ASSERT_TRUE(stream.Request(1, kNever).ok());
  auto packed = stream.ReadPacked();
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->info->item().key(), 4);
  ASSERT_EQ(packed->chunks.size(), 1);
  EXPECT_EQ(packed->chunks[0]->chunk_key(), 4 + 1'000'000);
  EXPECT_FALSE(packed->owners.empty());
  auto sample = UnpackSample(*std::move(packed));
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(Values<int32_t>(sample->columns[0]), (std::vector<int32_t>{40}));
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(SampleStreamTest, SamplesLargerThanAResponseAreGathered) {
  // Three chunks of 1.5 MB of incompressible data: the server sends them
  // in entries of several responses.
  auto table = FifoTable("fifo", *MinSizeRateLimiter(1));
  StartServer({table});
  std::vector<std::shared_ptr<Chunk>> chunks;
  std::vector<std::string> contents;
  for (uint64_t c = 0; c < 3; ++c) {
    const std::string bytes = testing::RandomBytes(1'500'000, c);
    contents.push_back(bytes);
    Tensor step;
    step.dtype = tensorflow::DT_UINT8;
    step.shape = {1, static_cast<int64_t>(bytes.size())};
    step.bytes = bytes;
    ChunkData data;
    data.set_chunk_key(100 + c);
    data.mutable_sequence_range()->set_episode_id(1);
    ASSERT_TRUE(
        CompressTensorAsProto(step, data.mutable_data()->add_tensors()).ok());
    data.set_data_tensors_len(1);
    data.set_data_uncompressed_size(static_cast<int64_t>(bytes.size()));
    chunks.push_back(std::make_shared<Chunk>(data));
  }
  ASSERT_TRUE(
      table
          ->InsertOrAssign(testing::MakeItem(1, 1.0, chunks), absl::Seconds(30))
          .ok());
  SampleStream stream(connection_, "fifo");
  ASSERT_TRUE(stream.Request(2, kNever).ok());
  // The first stays packed while the stream reads the second's responses:
  // `owners` keeps the responses its chunks came in.
  auto first = stream.ReadPacked();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GE(first->owners.size(), 2);
  auto second = stream.Read();
  ASSERT_TRUE(second.ok()) << second.status();
  auto unpacked = UnpackSample(*std::move(first));
  ASSERT_TRUE(unpacked.ok()) << unpacked.status();
  for (const Sample* sample : {&*unpacked, &*second}) {
    ASSERT_EQ(sample->columns.size(), 1);
    EXPECT_EQ(sample->columns[0].shape, (std::vector<int64_t>{3, 1'500'000}));
    EXPECT_TRUE(sample->columns[0].bytes ==
                contents[0] + contents[1] + contents[2]);
  }
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(SampleStreamTest, RateLimiterTimeoutIsDeadlineExceeded) {
  StartServer({FifoTable("empty", *MinSizeRateLimiter(1))});
  SampleStream stream(connection_, "empty");
  ASSERT_TRUE(stream.Request(1, absl::Milliseconds(100)).ok());
  auto sample = stream.Read();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kDeadlineExceeded)
      << sample.status();
  EXPECT_FALSE(stream.ok());
  // The stream has ended: its status is final.
  EXPECT_EQ(stream.Request(1, kNever).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stream.Read().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stream.Close().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(SampleStreamTest, ASubMillisecondTimeoutStillTimesOut) {
  StartServer({FifoTable("empty", *MinSizeRateLimiter(1))});
  SampleStream stream(connection_, "empty");
  ASSERT_TRUE(stream.Request(1, absl::Microseconds(100)).ok());
  // It went out as 1 ms, not as 0 (no timeout): the server's answer, not
  // the client's own deadline.
  absl::Status status = stream.Read().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_FALSE(absl::StrContains(status.message(), "No sample arrived"))
      << status;
}

// The server is reached through a proxy that freezes: the connection stays
// open and nothing comes back, as from a frozen host.
class FrozenServerTest : public SampleStreamTest {
 protected:
  void StartFrozenServer(absl::Duration keepalive) {
    auto table = FifoTable("table", *MinSizeRateLimiter(1), 1000,
                           /*max_times_sampled=*/0);
    StartServer({table});
    if (HasFatalFailure()) return;
    Insert(*table, 1, 1.0, 10);
    proxy_ = std::make_unique<testing::FreezableProxy>(server_->port());
    proxied_ = std::make_shared<Connection>(testing::Address(proxy_->port()),
                                            keepalive);
    ASSERT_TRUE(proxied_->WaitForConnection(absl::Seconds(30)).ok());
    stream_ = std::make_unique<SampleStream>(proxied_, "table");
    // The stream works, then the server freezes.
    ASSERT_TRUE(stream_->Request(1, kNever).ok());
    ASSERT_TRUE(stream_->Read().ok());
    proxy_->Freeze();
  }

  std::unique_ptr<testing::FreezableProxy> proxy_;
  std::shared_ptr<Connection> proxied_;
  std::unique_ptr<SampleStream> stream_;
};

TEST_F(FrozenServerTest, AReadHoldsTheRequestsTimeout) {
  StartFrozenServer(/*keepalive=*/kNever);
  ASSERT_TRUE(stream_->Request(1, absl::Milliseconds(100)).ok());
  auto sample = stream_->Read();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kDeadlineExceeded)
      << sample.status();
  EXPECT_FALSE(stream_->ok());
}

TEST_F(FrozenServerTest, KeepaliveEndsAReadWithoutATimeout) {
  StartFrozenServer(/*keepalive=*/absl::Milliseconds(200));
  ASSERT_TRUE(stream_->Request(1, kNever).ok());
  auto sample = stream_->Read();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kUnavailable)
      << sample.status();
}

TEST_F(SampleStreamTest, UnknownTableIsNotFound) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  SampleStream stream(connection_, "nope");
  absl::Status status = stream.Request(1, kNever);
  if (status.ok()) status = stream.Read().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_FALSE(stream.ok());
}

TEST_F(SampleStreamTest, CancelEndsABlockedRead) {
  StartServer({FifoTable("empty", *MinSizeRateLimiter(1))});
  SampleStream stream(connection_, "empty");
  ASSERT_TRUE(stream.Request(1, kNever).ok());
  std::thread canceller([&stream] {
    absl::SleepFor(absl::Milliseconds(100));
    stream.Cancel();
  });
  auto sample = stream.Read();
  canceller.join();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kCancelled)
      << sample.status();
  EXPECT_FALSE(stream.ok());
}

TEST_F(SampleStreamTest, StoppingTheServerEndsABlockedRead) {
  auto table = FifoTable("empty", *MinSizeRateLimiter(1));
  StartServer({table});
  const long unused = table.use_count();
  SampleStream stream(connection_, "empty");
  ASSERT_TRUE(stream.Request(1, kNever).ok());
  // The request waits at the table (its reactor holds the table): stopped
  // before, the server would not have had the call to end.
  ASSERT_TRUE(
      WaitFor([&] { return table.use_count() > unused; }, absl::Seconds(30)));
  std::thread stopper([this] {
    absl::SleepFor(absl::Milliseconds(100));
    server_->Stop();
  });
  auto sample = stream.Read();
  stopper.join();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kCancelled)
      << sample.status();
}

TEST_F(SampleStreamTest, ClosingWithSamplesOutstandingIsCancelled) {
  StartServer({FifoTable("empty", *MinSizeRateLimiter(1))});
  SampleStream stream(connection_, "empty");
  ASSERT_TRUE(stream.Request(2, kNever).ok());
  EXPECT_EQ(stream.Close().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(stream.ok());
  EXPECT_EQ(stream.Read().status().code(), absl::StatusCode::kCancelled);
}

TEST_F(SampleStreamTest, ASampleThatCannotBeUnpackedFailsTheStream) {
  auto table = FifoTable("fifo", *MinSizeRateLimiter(1));
  StartServer({table});
  // testing::MakeItem's chunk holds raw bytes where Snappy data belongs.
  ASSERT_TRUE(
      table->InsertOrAssign(testing::MakeItem(1), absl::Seconds(30)).ok());
  SampleStream stream(connection_, "fifo");
  ASSERT_TRUE(stream.Request(2, kNever).ok());
  auto sample = stream.Read();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kInvalidArgument)
      << sample.status();
  EXPECT_FALSE(stream.ok());
  EXPECT_EQ(stream.Read().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepmind::reverb
