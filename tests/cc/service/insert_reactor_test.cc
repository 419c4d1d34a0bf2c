// InsertReactor (cc/service/insert_reactor.h) through a real server: raw
// InsertStreams encoded here, confirmations read as InsertStreamResponses.
#include <cmath>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "cc/rate_limiters/presets.h"
#include "gtest/gtest.h"
#include "tests/cc/service/stream_test_util.h"

namespace deepmind::reverb::testing {
namespace {

using InsertCall = Call<InsertStreamResponse>;

class InsertReactorTest : public StreamTest {
 protected:
  void SetUp() override {
    // Takes every insert.
    free_ = FifoTable("free", *MinSizeRateLimiter(1));
    // Take one item, then one more per sample. A stream stops reading with
    // max_size / 10 inserts queued: 100 for `queue`, 1 for `small_queue`.
    queue_ = FifoTable("queue", *QueueRateLimiter(1), /*max_size=*/1000,
                       /*max_times_sampled=*/1);
    small_queue_ = FifoTable("small_queue", *QueueRateLimiter(1),
                             /*max_size=*/10, /*max_times_sampled=*/1);
    StartServer({free_, queue_, small_queue_});
  }

  // Reads responses until they have confirmed `n` keys in all.
  static std::vector<uint64_t> ReadKeys(InsertCall& call, size_t n) {
    std::vector<uint64_t> keys;
    InsertStreamResponse response;
    while (keys.size() < n) {
      if (!call.stream->Read(&response)) {
        ADD_FAILURE() << "The stream ended after confirming " << keys.size()
                      << " keys.";
        break;
      }
      keys.insert(keys.end(), response.keys().begin(), response.keys().end());
    }
    return keys;
  }

  // Half-closes, expects no more confirmations, and returns the status.
  static grpc::Status Close(InsertCall& call) {
    call.stream->WritesDone();
    InsertStreamResponse response;
    EXPECT_FALSE(call.stream->Read(&response)) << response.DebugString();
    return call.stream->Finish();
  }

  // Writes `requests` and expects the call to end with `code` and a message
  // that starts with `message`; then checks that the server still inserts.
  void ExpectEndsWith(const std::vector<grpc::ByteBuffer>& requests,
                      grpc::StatusCode code, const std::string& message) {
    auto call = OpenInsertStream();
    for (const grpc::ByteBuffer& request : requests) {
      if (!call->stream->Write(request)) break;  // The server has ended it.
    }
    InsertStreamResponse response;
    while (call->stream->Read(&response)) {
    }
    ExpectFinishesWith(*call, code, message);
    ExpectInsertsStillWork();
  }

  // A new stream inserts an item and gets it confirmed.
  void ExpectInsertsStillWork() {
    const uint64_t key = next_probe_key_++;
    auto call = OpenInsertStream();
    ASSERT_TRUE(call->stream->Write(
        InsertRequest({key + 1000}, {ItemOf(key, "free", {key + 1000})}, {})));
    EXPECT_EQ(ReadKeys(*call, 1), std::vector<uint64_t>{key});
    EXPECT_TRUE(Close(*call).ok());
  }

  std::shared_ptr<Table> free_;
  std::shared_ptr<Table> queue_;
  std::shared_ptr<Table> small_queue_;
  uint64_t next_probe_key_ = 1'000'000;
};

TEST_F(InsertReactorTest, ConfirmsTheItemsOfARequestTogetherInTheirOrder) {
  auto call = OpenInsertStream();
  // Chunks alone: nothing to confirm.
  ASSERT_TRUE(call->stream->Write(InsertRequest({11, 12}, {}, {})));
  ASSERT_TRUE(call->stream->Write(
      InsertRequest({},
                    {ItemOf(3, "free", {11}), ItemOf(1, "free", {12}),
                     ItemOf(2, "free", {11, 12})},
                    {})));
  // One response, with the items' keys in request order.
  InsertStreamResponse response;
  ASSERT_TRUE(call->stream->Read(&response));
  EXPECT_EQ(
      std::vector<uint64_t>(response.keys().begin(), response.keys().end()),
      (std::vector<uint64_t>{3, 1, 2}));
  EXPECT_TRUE(Close(*call).ok());
  EXPECT_EQ(free_->size(), 3);
}

TEST_F(InsertReactorTest, ConfirmsAnItemOnlyOnceItsTableHasInsertedIt) {
  auto call = OpenInsertStream();
  ASSERT_TRUE(call->stream->Write(InsertRequest(
      {21}, {ItemOf(1, "queue", {21}), ItemOf(2, "queue", {21})}, {})));
  EXPECT_EQ(ReadKeys(*call, 1), std::vector<uint64_t>{1});
  EXPECT_TRUE(queue_->Get(1).ok());
  // Item 2 waits for the rate limiter, unconfirmed. The server reads on, and
  // the call waits for item 2 after the client half-closes.
  EXPECT_EQ(queue_->Get(2).status().code(), absl::StatusCode::kNotFound);
  call->stream->WritesDone();

  auto sample = queue_->Sample(absl::Seconds(30));  // Lets item 2 in.
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->ref->item.key(), 1);
  InsertStreamResponse response;
  ASSERT_TRUE(call->stream->Read(&response));
  EXPECT_EQ(
      std::vector<uint64_t>(response.keys().begin(), response.keys().end()),
      std::vector<uint64_t>{2});
  EXPECT_TRUE(queue_->Get(2).ok());
  EXPECT_FALSE(call->stream->Read(&response));
  EXPECT_TRUE(call->stream->Finish().ok());
}

// A writer that saw no confirmation sends the items again elsewhere: a
// stream that fails must not leave them to be inserted later.
TEST_F(InsertReactorTest, ACancelledStreamWithdrawsItsQueuedItems) {
  const long unused = queue_.use_count();
  auto call = OpenInsertStream();
  ASSERT_TRUE(call->stream->Write(
      InsertRequest({21},
                    {ItemOf(1, "queue", {21}), ItemOf(2, "queue", {21}),
                     ItemOf(3, "queue", {21})},
                    {})));
  EXPECT_EQ(ReadKeys(*call, 1), std::vector<uint64_t>{1});
  // Items 2 and 3 wait for the rate limiter.
  call->context.TryCancel();
  EXPECT_EQ(call->stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  AwaitUseCount(queue_, unused);  // The server has let the stream go.

  // The rate limiter lets one item in: the next insert, not item 2.
  auto sample = queue_->Sample(absl::Seconds(30));
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->ref->item.key(), 1);
  ASSERT_TRUE(queue_->InsertOrAssign(MakeItem(4), absl::Seconds(30)).ok());
  EXPECT_EQ(queue_->size(), 1);
  EXPECT_TRUE(queue_->Get(4).ok());
}

TEST_F(InsertReactorTest, AStreamThatFailsWithdrawsItsQueuedItems) {
  const long unused = queue_.use_count();
  auto call = OpenInsertStream();
  ASSERT_TRUE(call->stream->Write(InsertRequest(
      {21}, {ItemOf(1, "queue", {21}), ItemOf(2, "queue", {21})}, {})));
  EXPECT_EQ(ReadKeys(*call, 1), std::vector<uint64_t>{1});
  // Item 2 waits; the next request fails the call.
  ASSERT_TRUE(
      call->stream->Write(InsertRequest({22}, {ItemOf(3, "nope", {22})}, {})));
  InsertStreamResponse response;
  EXPECT_FALSE(call->stream->Read(&response));
  ExpectFinishesWith(*call, grpc::StatusCode::NOT_FOUND,
                     "Priority table nope was not found");
  AwaitUseCount(queue_, unused);

  ASSERT_TRUE(queue_->Sample(absl::Seconds(30)).ok());
  ASSERT_TRUE(queue_->InsertOrAssign(MakeItem(4), absl::Seconds(30)).ok());
  EXPECT_EQ(queue_->size(), 1);
  EXPECT_TRUE(queue_->Get(4).ok());
}

TEST_F(InsertReactorTest, StopsReadingWhileItsTableHoldsBackAnInsert) {
  auto call = OpenInsertStream();
  ASSERT_TRUE(call->stream->Write(InsertRequest(
      {31}, {ItemOf(1, "small_queue", {31}), ItemOf(2, "small_queue", {31})},
      {})));
  EXPECT_EQ(ReadKeys(*call, 1), std::vector<uint64_t>{1});
  // Item 2 is queued in `small_queue`, so the server must not read this
  // request yet.
  ASSERT_TRUE(
      call->stream->Write(InsertRequest({32}, {ItemOf(3, "free", {32})}, {})));
  // A server that went on reading would insert item 3 at once. This wait
  // only gives such a server the time to show; a correct one passes anyway.
  const absl::Time until = absl::Now() + absl::Milliseconds(300);
  while (free_->size() == 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(free_->size(), 0);

  ASSERT_TRUE(small_queue_->Sample(absl::Seconds(30)).ok());  // Lets item 2 in.
  EXPECT_EQ(ReadKeys(*call, 2), (std::vector<uint64_t>{2, 3}));
  EXPECT_TRUE(Close(*call).ok());
  EXPECT_TRUE(free_->Get(3).ok());
}

TEST_F(InsertReactorTest, KeepsTheChunksAskedForAndReleasesTheOthers) {
  auto call = OpenInsertStream();
  ASSERT_TRUE(call->stream->Write(InsertRequest({41, 42}, {}, {})));
  ASSERT_TRUE(call->stream->Write(
      InsertRequest({}, {ItemOf(1, "free", {41, 42})}, /*keep=*/{42})));
  EXPECT_EQ(ReadKeys(*call, 1), std::vector<uint64_t>{1});
  auto sample = free_->Sample(absl::Seconds(30));
  ASSERT_TRUE(sample.ok()) << sample.status();
  const std::shared_ptr<const TableItem> item1 = sample->ref;
  ASSERT_EQ(item1->chunks.size(), 2);
  // Chunk 41 is held by item 1 only, chunk 42 by the stream as well.
  EXPECT_EQ(item1->chunks[0].use_count(), 1);
  EXPECT_EQ(item1->chunks[1].use_count(), 2);

  // Chunk 42 serves a later item without being sent again, then goes.
  ASSERT_TRUE(call->stream->Write(
      InsertRequest({}, {ItemOf(2, "free", {42})}, /*keep=*/{})));
  EXPECT_EQ(ReadKeys(*call, 1), std::vector<uint64_t>{2});
  auto item2 = free_->Get(2);
  ASSERT_TRUE(item2.ok()) << item2.status();
  EXPECT_EQ(item1->chunks[1].use_count(), 2);  // Items 1 and 2.

  // Chunk 41 was not kept: an item that needs it fails.
  ASSERT_TRUE(call->stream->Write(
      InsertRequest({}, {ItemOf(3, "free", {41})}, /*keep=*/{})));
  InsertStreamResponse response;
  EXPECT_FALSE(call->stream->Read(&response));
  ExpectFinishesWith(*call, grpc::StatusCode::INTERNAL,
                     "Could not find sequence chunk 41 for item 3");
  EXPECT_EQ(free_->Get(3).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(InsertReactorTest, ChunksAreNotSharedBetweenStreams) {
  auto sender = OpenInsertStream();
  ASSERT_TRUE(sender->stream->Write(InsertRequest({51}, {}, {})));
  // The sender's chunk is in its map once a later request of it is served.
  ASSERT_TRUE(sender->stream->Write(
      InsertRequest({}, {ItemOf(1, "free", {51})}, /*keep=*/{51})));
  EXPECT_EQ(ReadKeys(*sender, 1), std::vector<uint64_t>{1});

  ExpectEndsWith({InsertRequest({}, {ItemOf(2, "free", {51})}, {})},
                 grpc::StatusCode::INTERNAL,
                 "Could not find sequence chunk 51 for item 2");
  EXPECT_TRUE(Close(*sender).ok());
}

TEST_F(InsertReactorTest, RequestWithNeitherChunksNorItemsIsInvalid) {
  ExpectEndsWith({InsertRequest({}, {}, {7})},
                 grpc::StatusCode::INVALID_ARGUMENT,
                 "InsertStreamRequest has neither chunks nor items.");
}

TEST_F(InsertReactorTest, BytesThatDoNotParseAreInvalid) {
  // Field 2 (an item) whose 3 bytes are no PrioritizedItem.
  ExpectEndsWith({Bytes(std::string("\x12\x03\xff\xff\xff", 5))},
                 grpc::StatusCode::INVALID_ARGUMENT,
                 "Malformed InsertStreamRequest.");
}

TEST_F(InsertReactorTest, UnknownTableIsNotFoundAfterTheItemsBefore) {
  ExpectEndsWith(
      {InsertRequest({61}, {ItemOf(1, "free", {61}), ItemOf(2, "nope", {61})},
                     {})},
      grpc::StatusCode::NOT_FOUND, "Priority table nope was not found");
  EXPECT_TRUE(free_->Get(1).ok());  // Queued before the bad item.
}

TEST_F(InsertReactorTest, ChunkNeverSentIsInternal) {
  ExpectEndsWith({InsertRequest({71}, {ItemOf(1, "free", {71, 72})}, {})},
                 grpc::StatusCode::INTERNAL,
                 "Could not find sequence chunk 72 for item 1");
  EXPECT_EQ(free_->Get(1).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(InsertReactorTest, KeepingAChunkNeverSentFailsThePrecondition) {
  ExpectEndsWith(
      {InsertRequest({81}, {ItemOf(1, "free", {81})}, /*keep=*/{81, 82})},
      grpc::StatusCode::FAILED_PRECONDITION, "Kept less chunks than expected");
}

TEST_F(InsertReactorTest, ItemTheTableRejectsEndsTheCallWithItsStatus) {
  ExpectEndsWith(
      {InsertRequest({91}, {ItemOf(1, "free", {91}, std::nan(""))}, {})},
      grpc::StatusCode::INVALID_ARGUMENT, "Priority of item 1 is NaN.");
  EXPECT_EQ(free_->Get(1).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace deepmind::reverb::testing
