// SampleReactor (cc/service/sample_reactor.h) through a real server: raw
// SampleStreams whose requests are written here and whose responses are
// parsed as SampleStreamResponses and reassembled into samples. Items go
// into the tables directly.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "cc/core/errors.h"
#include "cc/rate_limiters/presets.h"
#include "cc/service/service.h"
#include "gtest/gtest.h"
#include "tests/cc/service/stream_test_util.h"

namespace deepmind::reverb::testing {
namespace {

using SampleCall = Call<SampleStreamResponse>;

struct ReceivedSample {
  SampleInfo info;
  std::vector<ChunkData> chunks;
};

// Reassembles the samples of a stream's responses, checking that each one
// starts with an entry that carries its info and ends with end_of_sequence.
class SampleReader {
 public:
  explicit SampleReader(SampleCall* call) : call_(call) {}

  // Reads responses until `n` samples in all are complete; false if the
  // stream ends first.
  bool ReadUntil(size_t n) {
    SampleStreamResponse response;
    while (samples_.size() < n) {
      if (!call_->stream->Read(&response)) return false;
      Add(response);
    }
    return true;
  }

  // Half-closes, then as ReadToEnd.
  grpc::Status Close() {
    call_->stream->WritesDone();
    return ReadToEnd();
  }

  // Reads what is left and returns the call's status.
  grpc::Status ReadToEnd() {
    SampleStreamResponse response;
    while (call_->stream->Read(&response)) Add(response);
    EXPECT_FALSE(in_sample_) << "The stream ended inside a sample.";
    return call_->Finish();
  }

  const std::vector<ReceivedSample>& samples() const { return samples_; }
  int responses() const { return responses_; }

  std::vector<uint64_t> keys() const {
    std::vector<uint64_t> keys;
    for (const ReceivedSample& sample : samples_) {
      keys.push_back(sample.info.item().key());
    }
    return keys;
  }

 private:
  void Add(const SampleStreamResponse& response) {
    ++responses_;
    for (const auto& entry : response.entries()) {
      if (!in_sample_) {
        EXPECT_TRUE(entry.has_info()) << "A sample's first entry has no info.";
        samples_.emplace_back();
        samples_.back().info = entry.info();
        in_sample_ = true;
      } else {
        EXPECT_FALSE(entry.has_info()) << "A later entry has info.";
      }
      for (const ChunkData& chunk : entry.data()) {
        samples_.back().chunks.push_back(chunk);
      }
      if (entry.end_of_sequence()) in_sample_ = false;
    }
  }

  SampleCall* const call_;
  std::vector<ReceivedSample> samples_;  // The last one may be incomplete.
  bool in_sample_ = false;
  int responses_ = 0;
};

std::vector<uint64_t> ChunkKeys(const ReceivedSample& sample) {
  std::vector<uint64_t> keys;
  for (const ChunkData& chunk : sample.chunks)
    keys.push_back(chunk.chunk_key());
  return keys;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> keys;
  for (uint64_t key = first; key <= last; ++key) keys.push_back(key);
  return keys;
}

class SampleReactorTest : public StreamTest {
 protected:
  // Starts a server with `tables` and the probe table.
  void Start(std::vector<std::shared_ptr<Table>> tables) {
    tables.push_back(probe_);
    StartServer(std::move(tables));
  }

  // Starts a server with a Fifo table "fifo" whose items go once sampled
  // (and the probe table); the table.
  std::shared_ptr<Table> StartWithFifo() {
    auto table = FifoTable("fifo", *MinSizeRateLimiter(1), 1000,
                           /*max_times_sampled=*/1);
    Start({table});
    return table;
  }

  static void Insert(Table& table, uint64_t first, uint64_t last) {
    for (uint64_t key = first; key <= last; ++key) {
      ASSERT_TRUE(table.InsertOrAssign(MakeItem(key)).ok());
    }
  }

  // Expects a stream that sent `request` to end with `code` and a message
  // that starts with `message`; then checks that the server still samples.
  void ExpectEndsWith(const grpc::ByteBuffer& request, grpc::StatusCode code,
                      const std::string& message) {
    auto call = OpenSampleStream();
    ASSERT_TRUE(call->stream->Write(request));
    SampleStreamResponse response;
    EXPECT_FALSE(call->stream->Read(&response));
    ExpectFinishesWith(*call, code, message);
    ExpectSamplesStillWork();
  }

  // A new stream samples an item of the probe table.
  void ExpectSamplesStillWork() {
    const uint64_t key = next_probe_key_++;
    Insert(*probe_, key, key);
    auto call = OpenSampleStream();
    ASSERT_TRUE(call->stream->Write(SampleRequest("probe", 1)));
    SampleReader reader(call.get());
    ASSERT_TRUE(reader.ReadUntil(1));
    EXPECT_EQ(reader.keys(), std::vector<uint64_t>{key});
    EXPECT_TRUE(reader.Close().ok());
  }

  const std::shared_ptr<Table> probe_ =
      FifoTable("probe", *MinSizeRateLimiter(1), 1000, /*max_times_sampled=*/1);
  uint64_t next_probe_key_ = 1'000'000;
};

TEST_F(SampleReactorTest, EachSampleCarriesTheChunksOfItsItemOnce) {
  auto table = StartWithFifo();
  // Item 10 reads chunks 1, 2 and 1 again; item 20 shares chunk 2.
  TableItem item10 = MakeItem(10, 1.5, {MakeChunk(1), MakeChunk(2)});
  *item10.item.mutable_flat_trajectory()
       ->mutable_columns(0)
       ->add_chunk_slices() =
      item10.item.flat_trajectory().columns(0).chunk_slices(0);
  ASSERT_TRUE(table->InsertOrAssign(item10).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(20, 2.5, {MakeChunk(2)})).ok());

  auto call = OpenSampleStream();
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 2)));
  SampleReader reader(call.get());
  ASSERT_TRUE(reader.ReadUntil(2));
  EXPECT_TRUE(reader.Close().ok());
  ASSERT_EQ(reader.samples().size(), 2);

  const ReceivedSample& first = reader.samples()[0];
  EXPECT_EQ(first.info.item().key(), 10);
  EXPECT_EQ(first.info.item().table(), "table");
  EXPECT_EQ(first.info.item().priority(), 1.5);
  EXPECT_EQ(first.info.item().times_sampled(), 1);
  ASSERT_EQ(first.info.item().flat_trajectory().columns_size(), 1);
  EXPECT_EQ(first.info.item().flat_trajectory().columns(0).chunk_slices_size(),
            3);
  EXPECT_EQ(first.info.probability(), 1);
  // Each chunk once, in order of first reference, with the bytes it had.
  EXPECT_EQ(ChunkKeys(first), (std::vector<uint64_t>{1, 2}));
  for (const ChunkData& chunk : first.chunks) {
    EXPECT_EQ(chunk.SerializeAsString(),
              MakeChunkData(chunk.chunk_key()).SerializeAsString());
  }
  // Chunk 2 again: chunks go with every sample that references them.
  const ReceivedSample& second = reader.samples()[1];
  EXPECT_EQ(second.info.item().key(), 20);
  EXPECT_EQ(second.info.item().priority(), 2.5);
  EXPECT_EQ(ChunkKeys(second), std::vector<uint64_t>{2});
}

TEST_F(SampleReactorTest, SamplesOfOneItemSpanResponsesOfAboutTwoMegabytes) {
  auto table = FifoTable("fifo", *MinSizeRateLimiter(1));
  Start({table});
  // Three chunks of 1.5 MB: the first response is full after two of them.
  const int32_t rows = (3 << 20) / 2 / 4;
  ASSERT_GT(2 * 4 * rows, ReverbServiceImpl::kMaxSampleResponseBytes);
  ASSERT_TRUE(table
                  ->InsertOrAssign(
                      MakeItem(1, 1.0,
                               {MakeChunk(1, 1, rows), MakeChunk(2, 1, rows),
                                MakeChunk(3, 1, rows)}))
                  .ok());

  auto call = OpenSampleStream();
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 1)));
  // Half-closed at once: the call still ends after the second response.
  SampleReader reader(call.get());
  EXPECT_TRUE(reader.Close().ok());
  EXPECT_EQ(reader.responses(), 2);
  ASSERT_EQ(reader.samples().size(), 1);
  ASSERT_EQ(ChunkKeys(reader.samples()[0]), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(reader.samples()[0].chunks[2].SerializeAsString(),
            MakeChunkData(3, 1, rows).SerializeAsString());
}

TEST_F(SampleReactorTest, AStreamNotReadTakesNoMoreThanItsResponsesMayHold) {
  auto table = StartWithFifo();  // Items go once sampled: count what is taken.
  constexpr int kItems = 64;
  constexpr int32_t kRows = 64 << 10;  // 256 KiB chunks.
  for (uint64_t key = 1; key <= kItems; ++key) {
    ASSERT_TRUE(
        table->InsertOrAssign(MakeItem(key, 1.0, {MakeChunk(key, 1, kRows)}))
            .ok());
  }
  auto call = OpenSampleStream();
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", kItems)));
  // Nothing is read: the server stops once its responses hold
  // kMaxQueuedSampleBytes (12 items) beyond what the transport's windows
  // took. Measured here: 24 items taken (12 of them in the windows); 32
  // without the bound (three responses of 2 MiB, batches closing at 4 MiB).
  absl::SleepFor(absl::Seconds(1));
  const int64_t taken = kItems - table->size();
  const int64_t bound =
      ReverbServiceImpl::kMaxQueuedSampleBytes / (4 * kRows) + 16;
  EXPECT_GT(taken, 0);
  EXPECT_LE(taken, bound);
  // The stream still delivers every sample once read.
  SampleReader reader(call.get());
  ASSERT_TRUE(reader.ReadUntil(kItems));
  EXPECT_TRUE(reader.Close().ok());
  EXPECT_EQ(reader.keys(), Range(1, kItems));
}

TEST_F(SampleReactorTest, SendsExactlyNumSamplesPerRequestInTurn) {
  auto table = StartWithFifo();
  Insert(*table, 1, 10);

  auto call = OpenSampleStream();
  SampleReader reader(call.get());
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 4)));
  ASSERT_TRUE(reader.ReadUntil(4));
  EXPECT_EQ(reader.keys(), Range(1, 4));
  // The server took no more than it owed from the table (each item goes
  // once sampled).
  EXPECT_EQ(table->size(), 6);

  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 3)));
  ASSERT_TRUE(reader.ReadUntil(7));
  EXPECT_TRUE(reader.Close().ok());
  EXPECT_EQ(reader.keys(), Range(1, 7));
  EXPECT_EQ(table->size(), 3);
}

TEST_F(SampleReactorTest, BatchesAreFlexible) {
  auto table = StartWithFifo();
  Insert(*table, 1, 3);

  auto call = OpenSampleStream();
  SampleReader reader(call.get());
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 5)));
  // The three items there are sent without waiting for five.
  ASSERT_TRUE(reader.ReadUntil(3));
  EXPECT_EQ(reader.keys(), Range(1, 3));
  Insert(*table, 4, 5);
  ASSERT_TRUE(reader.ReadUntil(5));
  EXPECT_TRUE(reader.Close().ok());
  EXPECT_EQ(reader.keys(), Range(1, 5));
}

TEST_F(SampleReactorTest, HalfClosedCallEndsOnceEverySampleOwedIsWritten) {
  auto table = StartWithFifo();
  auto call = OpenSampleStream();
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 3)));
  ASSERT_TRUE(call->stream->WritesDone());
  Insert(*table, 1, 3);
  SampleReader reader(call.get());
  EXPECT_TRUE(reader.ReadToEnd().ok());
  EXPECT_EQ(reader.keys(), Range(1, 3));
}

TEST_F(SampleReactorTest, RateLimiterTimeoutIsDeadlineExceeded) {
  auto table = StartWithFifo();
  Insert(*table, 1, 2);

  auto call = OpenSampleStream();
  SampleReader reader(call.get());
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 3, /*timeout_ms=*/50)));
  EXPECT_FALSE(reader.ReadUntil(3));
  // The samples there were are delivered before the error.
  EXPECT_EQ(reader.keys(), Range(1, 2));
  const grpc::Status status = call->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(), RateLimiterTimeout().message());
  ExpectSamplesStillWork();
}

TEST_F(SampleReactorTest, NonPositiveTimeoutsWaitForever) {
  auto table = StartWithFifo();
  const long unused = table.use_count();
  uint64_t key = 1;
  for (std::optional<int64_t> timeout_ms :
       {std::optional<int64_t>(0), std::optional<int64_t>(-1),
        std::optional<int64_t>()}) {
    SCOPED_TRACE(timeout_ms.has_value() ? std::to_string(*timeout_ms)
                                        : "no timeout");
    auto call = OpenSampleStream();
    SampleReader reader(call.get());
    ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 1, timeout_ms)));
    AwaitUseCount(table, unused + 1);  // The request is at the table.
    // A server that took the timeout for a deadline fails the call now. This
    // wait only gives it the time to; a correct one passes anyway.
    absl::SleepFor(absl::Milliseconds(100));
    Insert(*table, key, key);
    ASSERT_TRUE(reader.ReadUntil(1));
    EXPECT_EQ(reader.keys(), std::vector<uint64_t>{key});
    EXPECT_TRUE(reader.Close().ok());
    AwaitUseCount(table, unused);
    ++key;
  }
}

TEST_F(SampleReactorTest, CancellingAStreamWithdrawsItsRequestFromTheTable) {
  auto table = StartWithFifo();
  const long unused = table.use_count();
  auto call = OpenSampleStream();
  ASSERT_TRUE(call->stream->Write(SampleRequest("fifo", 1)));
  AwaitUseCount(table, unused + 1);  // The request waits at the table.
  call->context.TryCancel();
  EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
  AwaitUseCount(table, unused);  // The server has let the stream go.

  // A request still queued would take the item (and the stream is gone).
  Insert(*table, 7, 7);
  auto sample = table->Sample(absl::Seconds(30));
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->ref->item.key(), 7);
  EXPECT_EQ(sample->times_sampled, 1);
}

TEST_F(SampleReactorTest, BytesThatDoNotParseAreInvalid) {
  Start({});
  // Field 1 (the table) announces 5 bytes and has 2.
  ExpectEndsWith(Bytes(std::string("\x0a\x05"
                                   "ab",
                                   4)),
                 grpc::StatusCode::INVALID_ARGUMENT,
                 "Malformed SampleStreamRequest.");
}

TEST_F(SampleReactorTest, NonPositiveNumSamplesIsInvalid) {
  Start({});
  ExpectEndsWith(SampleRequest("probe", 0), grpc::StatusCode::INVALID_ARGUMENT,
                 "`num_samples` must be > 0, got 0.");
  ExpectEndsWith(SampleRequest("probe", -3), grpc::StatusCode::INVALID_ARGUMENT,
                 "`num_samples` must be > 0, got -3.");
}

TEST_F(SampleReactorTest, UnknownTableIsNotFound) {
  Start({});
  ExpectEndsWith(SampleRequest("nope", 1), grpc::StatusCode::NOT_FOUND,
                 "Priority table nope was not found");
}

}  // namespace
}  // namespace deepmind::reverb::testing
