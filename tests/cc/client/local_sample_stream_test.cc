// The in-process path for samples: Connection::LocalTable against a server
// in this process, and LocalSampleStream against the same table a
// SampleStream reads over gRPC.
#include "cc/client/local_sample_stream.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cc/client/client.h"
#include "cc/client/connection.h"
#include "cc/client/sample_stream.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using testing::FifoTable;
using testing::MakeInt32Item;
using testing::Values;

constexpr absl::Duration kNever = absl::InfiniteDuration();

class LocalSampleStreamTest : public testing::ConnectedServerTest {
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

TEST_F(LocalSampleStreamTest, ConnectionFindsTheTableOfAServerInProcess) {
  auto table = FifoTable("table", *MinSizeRateLimiter(1));
  StartServer({table});
  EXPECT_EQ(connection_->LocalTable("table"), table);
  EXPECT_EQ(connection_->LocalTable("table"), table);  // Remembered.
  EXPECT_EQ(connection_->LocalTable("missing"), nullptr);
}

TEST_F(LocalSampleStreamTest, InProcessCanBeTurnedOff) {
  auto table = FifoTable("table", *MinSizeRateLimiter(1));
  StartServer({table});
  std::optional<Connection> over_grpc;
  {
    testing::GrpcOnly grpc_only;
    over_grpc.emplace(testing::Address(server_->port()));
  }
  ASSERT_TRUE(over_grpc->WaitForConnection(absl::Seconds(30)).ok());
  EXPECT_EQ(over_grpc->LocalTable("table"), nullptr);
}

TEST_F(LocalSampleStreamTest, ClosedTableIsAskedForAgain) {
  // A server restarted on the same port hands over its new table.
  auto first = FifoTable("table", *MinSizeRateLimiter(1));
  StartServer({first});
  const int port = server_->port();
  ASSERT_EQ(connection_->LocalTable("table"), first);
  server_.reset();
  auto second = FifoTable("table", *MinSizeRateLimiter(1));
  ConnectedServerTest::StartServer({second}, port);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(connection_->WaitForConnection(absl::Seconds(30)).ok());
  // The channel may report the old connection as ready a moment longer: a
  // question that reaches it fails, and a failed one is asked again.
  std::shared_ptr<Table> handed;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((handed = connection_->LocalTable("table")) == nullptr &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(handed, second);
}

TEST_F(LocalSampleStreamTest, SamplesAreThoseOfTheGrpcPath) {
  // Two tables with the same items, one read over gRPC, one directly; each
  // item is sampled twice.
  auto over_grpc = FifoTable("a", *MinSizeRateLimiter(1), 1000, 2);
  auto local = FifoTable("b", *MinSizeRateLimiter(1), 1000, 2);
  StartServer({over_grpc, local});
  for (int i = 1; i <= 20; ++i) {
    Insert(*over_grpc, i, 0.5 * i, 10 * i);
    Insert(*local, i, 0.5 * i, 10 * i);
  }
  SampleStream grpc_stream(connection_, "a");
  LocalSampleStream local_stream(connection_->LocalTable("b"));
  ASSERT_TRUE(grpc_stream.Request(40, kNever).ok());
  ASSERT_TRUE(local_stream.Request(40, kNever).ok());
  for (int i = 0; i < 40; ++i) {
    SCOPED_TRACE(i);
    auto expected = grpc_stream.Read();
    auto sample = local_stream.Read();
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_TRUE(sample.ok()) << sample.status();
    SampleInfo expected_info = *expected->info;
    expected_info.mutable_item()->clear_inserted_at();
    SampleInfo info = *sample->info;
    info.mutable_item()->clear_inserted_at();
    EXPECT_TRUE(MessageDifferencer::Equals(info, expected_info))
        << info.DebugString() << " vs " << expected_info.DebugString();
    ASSERT_EQ(sample->columns.size(), 1);
    EXPECT_EQ(Values<int32_t>(sample->columns[0]),
              Values<int32_t>(expected->columns[0]));
  }
  EXPECT_EQ(local_stream.outstanding(), 0);
  EXPECT_TRUE(local_stream.Close().ok());
  EXPECT_EQ(local->info().num_local_samples(), 40);
  EXPECT_EQ(over_grpc->info().num_local_samples(), 0);
}

TEST_F(LocalSampleStreamTest, InfosShareArenasAndOutliveTheStream) {
  constexpr int kSamples = 2 * LocalSampleStream::kSamplesPerArena + 44;
  auto table = FifoTable("table", *MinSizeRateLimiter(1), 1000, 1);
  StartServer({table});
  for (int i = 1; i <= kSamples; ++i) Insert(*table, i, 0.5 * i, 10 * i);
  std::vector<PackedSample> samples;
  {
    LocalSampleStream stream(connection_->LocalTable("table"));
    ASSERT_TRUE(stream.Request(kSamples, kNever).ok());
    for (int i = 0; i < kSamples; ++i) {
      auto packed = stream.ReadPacked();
      ASSERT_TRUE(packed.ok()) << packed.status();
      samples.push_back(*std::move(packed));
    }
  }
  // kSamplesPerArena infos to an arena, in the order read.
  const int per_arena = LocalSampleStream::kSamplesPerArena;
  ASSERT_NE(samples[0].info->GetArena(), nullptr);
  EXPECT_EQ(samples[0].info->GetArena(),
            samples[per_arena - 1].info->GetArena());
  EXPECT_NE(samples[0].info->GetArena(), samples[per_arena].info->GetArena());
  // One sample of each arena outlives the stream and the others (ASan
  // builds check the memory); FIFO: sample i is item i + 1.
  const std::vector<int> kept = {5, per_arena + 7, kSamples - 1};
  std::vector<PackedSample> survivors;
  for (int i : kept) survivors.push_back(std::move(samples[i]));
  samples.clear();
  for (size_t k = 0; k < kept.size(); ++k) {
    SCOPED_TRACE(kept[k]);
    const SampleInfo& info = *survivors[k].info;
    EXPECT_EQ(info.item().key(), kept[k] + 1);
    EXPECT_EQ(info.item().priority(), 0.5 * (kept[k] + 1));
    EXPECT_EQ(info.item().table(), "table");
    auto sample = UnpackSample(std::move(survivors[k]));
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_EQ(Values<int32_t>(sample->columns[0]),
              std::vector<int32_t>{10 * (kept[k] + 1)});
  }
}

TEST_F(LocalSampleStreamTest, BatchesAreNotClosedAtAMegabyte) {
  // A server closes its batches at 1 MB, a response's worth; these samples
  // only reference the chunks, so the first read takes all 8 asked for
  // (4.8 MB of chunks), and the others need the table no more.
  auto table = FifoTable("table", *MinSizeRateLimiter(1));
  StartServer({table});
  auto chunk = testing::MakeChunk(100, 1, 150'000);  // 600 kB.
  for (uint64_t key = 1; key <= 8; ++key) {
    ASSERT_TRUE(table
                    ->InsertOrAssign(testing::MakeItem(key, 1.0, {chunk}),
                                     absl::Seconds(30))
                    .ok());
  }
  LocalSampleStream stream(table);
  ASSERT_TRUE(stream.Request(8, kNever).ok());
  ASSERT_TRUE(stream.ReadPacked().ok());
  table->Close();
  for (int i = 1; i < 8; ++i) {
    EXPECT_TRUE(stream.ReadPacked().ok()) << "read " << i;
  }
}

TEST_F(LocalSampleStreamTest, RateLimiterTimeoutEndsTheStream) {
  auto table = FifoTable("table", *MinSizeRateLimiter(1));
  StartServer({table});
  LocalSampleStream stream(connection_->LocalTable("table"));
  ASSERT_TRUE(stream.Request(1, absl::Milliseconds(50)).ok());
  auto sample = stream.Read();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(stream.ok());
  EXPECT_EQ(stream.Request(1, kNever).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(LocalSampleStreamTest, CancelEndsAWaitingRead) {
  auto table = FifoTable("table", *MinSizeRateLimiter(1));
  StartServer({table});
  LocalSampleStream stream(connection_->LocalTable("table"));
  ASSERT_TRUE(stream.Request(1, kNever).ok());
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(50));
    stream.Cancel();
  });
  auto sample = stream.Read();
  canceller.join();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kCancelled);
  // The withdrawn request took nothing: a later item stays in the table.
  Insert(*table, 1, 1, 1);
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(table->info().num_unique_samples(), 0);
}

TEST_F(LocalSampleStreamTest, ServerStopEndsAWaitingRead) {
  auto table = FifoTable("table", *MinSizeRateLimiter(1));
  StartServer({table});
  LocalSampleStream stream(connection_->LocalTable("table"));
  ASSERT_TRUE(stream.Request(1, kNever).ok());
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(50));
    server_->Stop();
  });
  auto sample = stream.Read();
  stopper.join();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kCancelled);
}

TEST_F(LocalSampleStreamTest, ClientSamplersTakeTheLocalPath) {
  auto table = FifoTable("table", *MinSizeRateLimiter(1), 1000, 1);
  StartServer({table});
  for (int i = 1; i <= 5; ++i) Insert(*table, i, 1, i);
  Client client(testing::Address(server_->port()));
  SamplerOptions options;
  options.max_samples = 5;
  auto sampler = client.NewSampler("table", options);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  for (int i = 1; i <= 5; ++i) {
    auto sample = (*sampler)->GetNextSample();
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_EQ(Values<int32_t>(sample->columns[0]), std::vector<int32_t>{i});
  }
  auto stream = client.NewSampleStream("table", absl::Seconds(30));
  ASSERT_TRUE(stream.ok());
  EXPECT_NE(dynamic_cast<LocalSampleStream*>(stream->get()), nullptr);
  EXPECT_EQ(table->info().num_local_samples(), 5);
}

}  // namespace
}  // namespace deepmind::reverb
