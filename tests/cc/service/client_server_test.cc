// End-to-end tests of the service through a real server on loopback: the
// legacy Writer, the TrajectoryWriter's items, the Sampler and the unary
// calls of Client.
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "cc/client/client.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/uniform.h"
#include "cc/service/server.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using testing::Address;
using testing::FifoTable;
using testing::Int32;
using testing::StartLoopbackServer;
using testing::Values;
using testing::WaitFor;

class ClientServerTest : public testing::ServerTest {
 protected:
  void StartServer(std::vector<std::shared_ptr<Table>> tables) {
    ServerTest::StartServer(std::move(tables));
    if (HasFatalFailure()) return;
    client_ = std::make_unique<Client>(Address(server_->port()));
  }

  std::unique_ptr<Writer> NewWriter(int chunk_length, int max_timesteps,
                                    bool delta = false) {
    WriterOptions options;
    options.chunk_length = chunk_length;
    options.max_timesteps = max_timesteps;
    options.delta_encoded = delta;
    return *client_->NewWriter(options);
  }

  std::unique_ptr<Sampler> NewSampler(
      const std::string& table, int64_t max_samples,
      absl::Duration timeout = absl::InfiniteDuration()) {
    SamplerOptions options;
    options.max_samples = max_samples;
    options.rate_limiter_timeout = timeout;
    options.reconnect_window = absl::Seconds(2);
    return *client_->NewSampler(table, options);
  }

  std::unique_ptr<Client> client_;
};

TEST_F(ClientServerTest, WriterItemsSpanChunksAndSampleBack) {
  StartServer({FifoTable("fifo", *MinSizeRateLimiter(1))});
  for (bool delta : {false, true}) {
    SCOPED_TRACE(delta);
    auto writer = NewWriter(/*chunk_length=*/2, /*max_timesteps=*/3, delta);
    for (int32_t t = 0; t < 5; ++t) {
      ASSERT_TRUE(writer->Append({Int32({t}, {}), Int32({t, -t}, {2})}).ok());
    }
    // Steps 2..4: the second chunk (2, 3) and the buffered step 4.
    ASSERT_TRUE(writer->CreateItem("fifo", 3, 1.5).ok());
    EXPECT_EQ(writer->CreateItem("fifo", 4, 1).code(),
              absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(writer->Close().ok());

    auto sampler = NewSampler("fifo", 1);
    auto sample = sampler->GetNextSample(absl::Seconds(30));
    ASSERT_TRUE(sample.ok()) << sample.status();
    ASSERT_EQ(sample->columns.size(), 2);
    EXPECT_EQ(sample->columns[0].shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(Values<int32_t>(sample->columns[0]),
              (std::vector<int32_t>{2, 3, 4}));
    EXPECT_EQ(sample->columns[1].shape, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(Values<int32_t>(sample->columns[1]),
              (std::vector<int32_t>{2, -2, 3, -3, 4, -4}));
    EXPECT_EQ(sample->info->item().priority(), 1.5);
    EXPECT_EQ(sample->info->item().times_sampled(), 1);
    EXPECT_EQ(sampler->GetNextSample().status().code(),
              absl::StatusCode::kOutOfRange);
    ASSERT_TRUE(client_->Reset("fifo", absl::Seconds(30)).ok());
  }
}

TEST_F(ClientServerTest, TrajectoryWriterItemsShareASlicePerChunkRun) {
  StartServer({FifoTable("fifo", *MinSizeRateLimiter(1))});
  auto writer = *client_->NewTrajectoryWriter(
      std::make_shared<ConstantChunkerOptions>(2, 5));
  std::vector<std::weak_ptr<CellRef>> cells;
  for (int32_t t = 0; t < 5; ++t) {
    auto refs = writer->Append({Int32({t}, {})});
    ASSERT_TRUE(refs.ok()) << refs.status();
    cells.push_back(*(*refs)[0]);
  }
  const absl::Time before = absl::Now();
  // Column 0: cells 0, 1 (chunk one), 2 (chunk two), 4; column 1: cell 3
  // squeezed; column 2: cells 1 and 0 (out of order: two slices).
  ASSERT_TRUE(writer
                  ->CreateItem("fifo", 2.5,
                               {{{cells[0], cells[1], cells[2], cells[4]}},
                                {{cells[3]}, /*squeeze=*/true},
                                {{cells[1], cells[0]}}})
                  .ok());
  ASSERT_TRUE(writer->Flush(0, absl::Seconds(30)).ok());
  writer->Close();

  auto sample = NewSampler("fifo", 1)->GetNextSample(absl::Seconds(30));
  ASSERT_TRUE(sample.ok()) << sample.status();
  const PrioritizedItem& item = sample->info->item();
  EXPECT_EQ(item.priority(), 2.5);
  const absl::Time inserted =
      absl::FromUnixSeconds(item.inserted_at().seconds()) +
      absl::Nanoseconds(item.inserted_at().nanos());
  EXPECT_GE(inserted, before - absl::Seconds(1));
  EXPECT_LE(inserted, absl::Now());
  const auto& columns = item.flat_trajectory().columns();
  ASSERT_EQ(columns.size(), 3);
  auto slices = [](const FlatTrajectory::Column& column) {
    std::vector<std::pair<int, int>> out;  // (offset, length)
    for (const auto& slice : column.chunk_slices()) {
      out.emplace_back(slice.offset(), slice.length());
    }
    return out;
  };
  EXPECT_EQ(slices(columns[0]),
            (std::vector<std::pair<int, int>>{{0, 2}, {0, 1}, {0, 1}}));
  EXPECT_FALSE(columns[0].squeeze());
  EXPECT_EQ(slices(columns[1]), (std::vector<std::pair<int, int>>{{1, 1}}));
  EXPECT_TRUE(columns[1].squeeze());
  EXPECT_EQ(slices(columns[2]),
            (std::vector<std::pair<int, int>>{{1, 1}, {0, 1}}));
  EXPECT_EQ(Values<int32_t>(sample->columns[0]),
            (std::vector<int32_t>{0, 1, 2, 4}));
  EXPECT_EQ(Values<int32_t>(sample->columns[1]), (std::vector<int32_t>{3}));
  EXPECT_EQ(Values<int32_t>(sample->columns[2]), (std::vector<int32_t>{1, 0}));
}

TEST_F(ClientServerTest, TrajectoryWriterAppendsNothingOfABadStep) {
  StartServer({FifoTable("fifo", *MinSizeRateLimiter(1))});
  auto writer = *client_->NewTrajectoryWriter(
      std::make_shared<ConstantChunkerOptions>(2, 2));
  Tensor good = Int32({1}, {});
  Tensor rows = Int32({2}, {1});
  TensorView short_bytes = good;
  short_bytes.bytes.remove_suffix(1);
  EXPECT_EQ(writer->Append({good, short_bytes}).status().code(),
            absl::StatusCode::kInvalidArgument);
  TensorView short_rows = rows;
  short_rows.bytes.remove_suffix(1);
  EXPECT_EQ(writer->AppendBatch({rows, short_rows}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Neither left its good column in the buffer: step 0 is still to come
  // in both columns (else "Column 0 already has step 0").
  auto refs = writer->Append({good, good});
  ASSERT_TRUE(refs.ok()) << refs.status();
  EXPECT_EQ((*refs)[0]->lock()->episode_step(), 0);
  EXPECT_EQ((*refs)[1]->lock()->episode_step(), 0);
  writer->Close();
}

TEST_F(ClientServerTest, TrajectoryWriterRejectsColumnsOfMixedCells) {
  StartServer({FifoTable("fifo", *MinSizeRateLimiter(1))});
  auto writer = *client_->NewTrajectoryWriter(
      std::make_shared<ConstantChunkerOptions>(1, 2));
  Tensor as_float = Int32({1}, {});
  as_float.dtype = tensorflow::DT_FLOAT;
  auto refs = writer->Append({Int32({1}, {}), Int32({1, 2}, {2}), as_float});
  ASSERT_TRUE(refs.ok()) << refs.status();
  auto ref = [&](int c) { return *(*refs)[c]; };
  struct Case {
    std::vector<TrajectoryColumn> trajectory;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{{ref(0)}}, {{ref(0), ref(2)}}},
       "Error in column 1: Column references tensors with different dtypes: "
       "int32 (index 0) != float (index 1)."},
      {{{{ref(0), ref(1)}}},
       "Error in column 0: Column references tensors with incompatible "
       "shapes: [] (index 0) not compatible with [2] (index 1)."},
      {{{{}}, {{}}}, "trajectory must not be empty."},
      {{{{ref(0)}}, {{}}}, "Error in column 1: the column is empty."},
  };
  for (const Case& c : cases) {
    for (const absl::Status& status :
         {writer->CreateItem("fifo", 1, c.trajectory),
          writer->CheckTrajectory(c.trajectory)}) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(status.message(), c.message);
    }
  }
  EXPECT_TRUE(writer->CheckTrajectory({{{ref(0)}, true}}).ok());
  EXPECT_EQ(writer->num_pending_items(), 0);  // Nothing was queued.
  writer->Close();
  for (const absl::Status& status :
       {writer->CreateItem("fifo", 1, {{{ref(0)}}}),
        writer->CheckTrajectory({{{ref(0)}}}), writer->Flush()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(status.message(), "TrajectoryWriter::Close has been called.");
  }
}

TEST_F(ClientServerTest, SamplerKeepsTheTableOrderOfSmallAndLargeSamples) {
  // A queue: each item is sampled once, oldest first. Items alternate
  // between one step (400 bytes, unpacked by the stream's worker and queued
  // in groups) and five (2,000 bytes, unpacked on other threads).
  StartServer({FifoTable("queue", *MinSizeRateLimiter(1), 1000,
                         /*max_times_sampled=*/1)});
  auto writer = NewWriter(/*chunk_length=*/1, /*max_timesteps=*/5);
  constexpr int kItems = 300;
  auto step = [](int32_t t) {
    return Int32(std::vector<int32_t>(100, t), {100});
  };
  for (int32_t t = 0; t < 4; ++t) ASSERT_TRUE(writer->Append({step(t)}).ok());
  for (int32_t i = 0; i < kItems; ++i) {
    ASSERT_TRUE(writer->Append({step(i + 4)}).ok());
    ASSERT_TRUE(writer->CreateItem("queue", i % 2 == 0 ? 1 : 5, 1).ok());
  }
  ASSERT_TRUE(writer->Close().ok());

  auto sampler = NewSampler("queue", kItems);
  for (int32_t i = 0; i < kItems; ++i) {
    auto sample = sampler->GetNextSample(absl::Seconds(30));
    ASSERT_TRUE(sample.ok()) << sample.status();
    ASSERT_EQ(sample->columns.size(), 1);
    EXPECT_EQ(sample->columns[0].shape[0], i % 2 == 0 ? 1 : 5);
    EXPECT_EQ(Values<int32_t>(sample->columns[0]).back(), i + 4)
        << "sample " << i;
  }
  EXPECT_EQ(sampler->GetNextSample().status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(ClientServerTest, FlushTimesOutWhileRateLimitedThenSucceeds) {
  StartServer({FifoTable("queue", *QueueRateLimiter(1), 1, 1)});
  auto writer = NewWriter(1, 1);
  for (int32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(writer->Append({Int32({i}, {})}).ok());
    ASSERT_TRUE(writer->CreateItem("queue", 1, 1).ok());
  }
  absl::Status flush = writer->Flush(absl::Milliseconds(300));
  EXPECT_EQ(flush.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(flush.message(), "Timeout exceeded"));

  auto sampler = NewSampler("queue", 2);
  for (int32_t i = 0; i < 2; ++i) {
    auto sample = sampler->GetNextSample(absl::Seconds(30));
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_EQ(Values<int32_t>(sample->columns[0]), (std::vector<int32_t>{i}));
  }
  EXPECT_TRUE(writer->Flush(absl::Seconds(30)).ok());
  EXPECT_TRUE(writer->Close().ok());
}

TEST_F(ClientServerTest, RateLimiterTimeoutReachesTheSampler) {
  StartServer({FifoTable("empty", *MinSizeRateLimiter(1))});
  auto sampler = NewSampler("empty", 1, absl::Milliseconds(100));
  auto sample = sampler->GetNextSample(absl::Seconds(30));
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kDeadlineExceeded);
  // A client-side timeout, with no server-side one, also ends the wait.
  auto patient = NewSampler("empty", 1);
  EXPECT_EQ(patient->GetNextSample(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ClientServerTest, UnknownTableIsNotFound) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto sampler = NewSampler("nope", 1);
  EXPECT_EQ(sampler->GetNextSample(absl::Seconds(30)).status().code(),
            absl::StatusCode::kNotFound);
  auto writer = NewWriter(1, 1);
  ASSERT_TRUE(writer->Append({Int32({1}, {})}).ok());
  ASSERT_TRUE(writer->CreateItem("nope", 1, 1).ok());
  EXPECT_EQ(writer->Flush(absl::Seconds(30)).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Reset("nope", absl::Seconds(30)).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientServerTest, StoppingTheServerEndsWaitingCalls) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto sampler = NewSampler("t", 1);
  std::thread stopper([this] {
    absl::SleepFor(absl::Milliseconds(200));
    server_->Stop();
  });
  auto sample = sampler->GetNextSample(absl::Seconds(60));
  stopper.join();
  EXPECT_FALSE(sample.ok());
  EXPECT_NE(sample.status().code(), absl::StatusCode::kDeadlineExceeded)
      << "the sampler should fail, not wait for its timeout";
  EXPECT_TRUE(server_->Wait(absl::ZeroDuration()));

  // A writer to the stopped server fails instead of hanging.
  auto writer = NewWriter(1, 1);
  ASSERT_TRUE(writer->Append({Int32({1}, {})}).ok());
  absl::Status status = writer->CreateItem("t", 1, 1);
  if (status.ok()) status = writer->Flush(absl::Seconds(60));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

TEST_F(ClientServerTest, SamplerEndsWhenTheServerStops) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  SamplerOptions options;
  options.reconnect_window = absl::Seconds(60);
  auto sampler = *client_->NewSampler("t", options);
  // The stream's request waits on the rate limiter of the empty table. A
  // server stopped before the request reached it would look like one not
  // up yet: the sampler would retry.
  ASSERT_TRUE(
      WaitFor([&] { return table->samples_waiting(); }, absl::Seconds(30)));
  auto sample = sampler->GetNextSample(absl::Milliseconds(200));
  ASSERT_TRUE(absl::IsDeadlineExceeded(sample.status())) << sample.status();
  EXPECT_TRUE(sampler->error().ok());

  // The server cancels the stream when it stops: the end (a retry would end
  // in UNAVAILABLE once the reconnect window has passed).
  server_->Stop();
  sample = sampler->GetNextSample(absl::Seconds(30));
  EXPECT_TRUE(absl::IsCancelled(sample.status())) << sample.status();
  EXPECT_TRUE(absl::IsCancelled(sampler->error())) << sampler->error();
}

TEST_F(ClientServerTest, SamplerWaitsForAServerToComeUp) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  const int port = server_->port();
  server_->Stop();
  server_.reset();

  // No server on the port: the sampler's streams retry while it is down.
  Client client(Address(port));
  SamplerOptions options;
  options.reconnect_window = absl::Seconds(60);
  auto sampler = *client.NewSampler("t", options);
  auto sample = sampler->GetNextSample(absl::Milliseconds(300));
  ASSERT_TRUE(absl::IsDeadlineExceeded(sample.status())) << sample.status();

  auto restarted =
      StartLoopbackServer({FifoTable("t", *MinSizeRateLimiter(1))}, port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  server_ = *std::move(restarted);
  auto writer = *client.NewWriter(WriterOptions());
  ASSERT_TRUE(writer->Append({Int32({2}, {})}).ok());
  ASSERT_TRUE(writer->CreateItem("t", 1, 1).ok());
  ASSERT_TRUE(writer->Close().ok());
  sample = sampler->GetNextSample(absl::Seconds(30));
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(Values<int32_t>(sample->columns[0]), (std::vector<int32_t>{2}));
}

TEST_F(ClientServerTest, ServerInfoMutateAndReset) {
  StartServer({FifoTable("a", *MinSizeRateLimiter(1)),
               FifoTable("b", *MinSizeRateLimiter(1))});
  auto writer = NewWriter(1, 1);
  for (int32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(writer->Append({Int32({i}, {})}).ok());
    ASSERT_TRUE(writer->CreateItem("a", 1, i).ok());
  }
  ASSERT_TRUE(writer->Close().ok());

  auto info = client_->ServerInfo(absl::Seconds(30));
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->table_info_size(), 2);
  EXPECT_EQ(info->table_info(0).name(), "a");
  EXPECT_EQ(info->table_info(0).current_size(), 3);
  EXPECT_EQ(info->table_info(1).current_size(), 0);
  auto again = client_->ServerInfo(absl::Seconds(30));
  EXPECT_EQ(again->tables_state_id().high(), info->tables_state_id().high());
  EXPECT_EQ(again->tables_state_id().low(), info->tables_state_id().low());

  // Fifo samples the oldest item: delete it, then update the next one.
  auto oldest = *NewSampler("a", 1)->GetNextSample(absl::Seconds(30));
  ASSERT_TRUE(client_
                  ->MutatePriorities("a", {}, {oldest.info->item().key()},
                                     absl::Seconds(30))
                  .ok());
  EXPECT_EQ(
      client_->ServerInfo(absl::Seconds(30))->table_info(0).current_size(), 2);
  auto next = *NewSampler("a", 1)->GetNextSample(absl::Seconds(30));
  EXPECT_NE(next.info->item().key(), oldest.info->item().key());
  KeyWithPriority update;
  update.set_key(next.info->item().key());
  update.set_priority(42);
  // The unknown key (the deleted one) is ignored.
  ASSERT_TRUE(client_
                  ->MutatePriorities("a", {update}, {oldest.info->item().key()},
                                     absl::Seconds(30))
                  .ok());
  auto updated = *NewSampler("a", 1)->GetNextSample(absl::Seconds(30));
  EXPECT_EQ(updated.info->item().key(), next.info->item().key());
  EXPECT_EQ(updated.info->item().priority(), 42);
  EXPECT_EQ(updated.info->item().times_sampled(), 2);

  ASSERT_TRUE(client_->Reset("a", absl::Seconds(30)).ok());
  EXPECT_EQ(
      client_->ServerInfo(absl::Seconds(30))->table_info(0).current_size(), 0);
  EXPECT_EQ(client_->Checkpoint(absl::Seconds(30)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientServerTest, ConcurrentWritersAndSamplers) {
  constexpr int kWriters = 4;
  constexpr int kItemsPerWriter = 200;
  StartServer({FifoTable("t", *MinSizeRateLimiter(1), 100000)});
  std::vector<std::thread> threads;
  std::atomic<int> sampled{0};
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto writer = NewWriter(5, 5);
      for (int32_t i = 0; i < kItemsPerWriter; ++i) {
        ASSERT_TRUE(writer->Append({Int32({w * 1000 + i}, {})}).ok());
        ASSERT_TRUE(writer->CreateItem("t", 1, 1).ok());
      }
      ASSERT_TRUE(writer->Close(absl::Seconds(60)).ok());
    });
    threads.emplace_back([&] {
      auto sampler = NewSampler("t", 300);
      for (int i = 0; i < 300; ++i) {
        auto sample = sampler->GetNextSample(absl::Seconds(60));
        ASSERT_TRUE(sample.ok()) << sample.status();
        ASSERT_EQ(sample->columns[0].shape, (std::vector<int64_t>{1}));
        ++sampled;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(sampled.load(), kWriters * 300);
  EXPECT_EQ(
      client_->ServerInfo(absl::Seconds(30))->table_info(0).current_size(),
      kWriters * kItemsPerWriter);
}

}  // namespace
}  // namespace deepmind::reverb
