// InsertStream against a real server on loopback: confirmations, the
// server's errors, closing and cancelling with items outstanding, and
// servers that are not there.
#include "cc/client/insert_stream.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "cc/support/mutex.h"
#include "cc/wire/grpc_status.h"
#include "gtest/gtest.h"
#include "tests/cc/client/writer_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using ::deepmind::reverb::testing::Address;
using ::deepmind::reverb::testing::FifoTable;
using ::deepmind::reverb::testing::MakeChunkData;
using ::deepmind::reverb::testing::MakePrioritizedItem;
using ::deepmind::reverb::testing::StoredItems;

// What a stream's callbacks were given.
class Confirmations {
 public:
  InsertStream::ConfirmedCallback OnConfirmed() {
    return [this](absl::Span<const uint64_t> keys) {
      MutexLock lock(&mu_);
      EXPECT_EQ(ended_, 0) << "a confirmation after the end";
      keys_.insert(keys_.end(), keys.begin(), keys.end());
    };
  }
  InsertStream::EndedCallback OnEnded() {
    return [this] {
      MutexLock lock(&mu_);
      ++ended_;
    };
  }

  std::vector<uint64_t> keys() const {
    MutexLock lock(&mu_);
    return keys_;
  }
  int ended() const {
    MutexLock lock(&mu_);
    return ended_;
  }
  // Whether `n` keys were confirmed within 60 s.
  bool WaitForKeys(size_t n) const {
    MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return keys_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60));
  }
  // Whether the stream ended within 60 s.
  bool WaitForEnd() const {
    MutexLock lock(&mu_);
    auto done = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60));
  }

 private:
  mutable Mutex mu_;
  std::vector<uint64_t> keys_ ABSL_GUARDED_BY(mu_);
  int ended_ ABSL_GUARDED_BY(mu_) = 0;
};

std::shared_ptr<const ChunkData> Chunk(uint64_t key) {
  return std::make_shared<ChunkData>(MakeChunkData(key));
}

class InsertStreamTest : public testing::ConnectedServerTest {
 protected:
  std::unique_ptr<InsertStream> Open() {
    auto stream = InsertStream::Open(connection_, absl::Seconds(30),
                                     seen_.OnConfirmed(), seen_.OnEnded());
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? *std::move(stream) : nullptr;
  }

  // Starts a server over a queue of one, "q", and opens `stream` to it,
  // writing items 1 and 2 over chunk 100: item 1 is confirmed, item 2 waits
  // until item 1 is sampled.
  void WriteTwoToAQueueOfOne(std::shared_ptr<Table>& table,
                             std::unique_ptr<InsertStream>& stream) {
    table = FifoTable("q", *QueueRateLimiter(1), 1);
    StartServer({table});
    stream = Open();
    ASSERT_NE(stream, nullptr);
    InsertStreamRequest request;
    *request.add_items() = MakePrioritizedItem(1, "q", 100);
    *request.add_items() = MakePrioritizedItem(2, "q", 100);
    ASSERT_TRUE(stream->Write(request, {Chunk(100)},
                              InsertStream::Then::kMoreChunksFollow));
    ASSERT_TRUE(seen_.WaitForKeys(1));
  }

  Confirmations seen_;
};

TEST_F(InsertStreamTest, ConfirmsTheWrittenKeysInOrder) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  auto stream = Open();
  ASSERT_NE(stream, nullptr);
  // Three items on one chunk, which the server keeps; then two more on it.
  InsertStreamRequest first;
  for (uint64_t key : {11, 12, 13})
    *first.add_items() = MakePrioritizedItem(key, "t", 100);
  first.add_keep_chunk_keys(100);
  ASSERT_TRUE(stream->Write(first, {Chunk(100)},
                            InsertStream::Then::kMoreChunksFollow));
  InsertStreamRequest second;
  for (uint64_t key : {14, 15})
    *second.add_items() = MakePrioritizedItem(key, "t", 100, 2);
  ASSERT_TRUE(stream->Write(second, {}, InsertStream::Then::kMoreChunksFollow));
  ASSERT_TRUE(seen_.WaitForKeys(5));
  EXPECT_EQ(seen_.keys(), (std::vector<uint64_t>{11, 12, 13, 14, 15}));
  EXPECT_EQ(seen_.ended(), 0);

  EXPECT_TRUE(stream->Close().ok());
  EXPECT_EQ(seen_.ended(), 1);
  auto stored = StoredItems(*table);
  ASSERT_EQ(stored.size(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(stored[i].item.key(), 11 + i);
    EXPECT_EQ(stored[i].item.priority(), i < 3 ? 1.0 : 2.0);
    EXPECT_EQ(stored[i].chunk_keys, (std::vector<uint64_t>{100}));
  }
}

TEST_F(InsertStreamTest, AnUnknownTableEndsTheStreamWithNotFound) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto stream = Open();
  ASSERT_NE(stream, nullptr);
  InsertStreamRequest request;
  *request.add_items() = MakePrioritizedItem(1, "nope", 100);
  ASSERT_TRUE(stream->Write(request, {Chunk(100)},
                            InsertStream::Then::kMoreChunksFollow));
  ASSERT_TRUE(seen_.WaitForEnd());
  EXPECT_FALSE(stream->Write(request, {Chunk(100)},
                             InsertStream::Then::kMoreChunksFollow));
  absl::Status status = stream->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "Priority table nope was not found");
  EXPECT_TRUE(seen_.keys().empty());
  EXPECT_EQ(seen_.ended(), 1);
}

TEST_F(InsertStreamTest, AMissingChunkEndsTheStreamWithInternal) {
  auto table = FifoTable("t", *MinSizeRateLimiter(1));
  StartServer({table});
  auto stream = Open();
  ASSERT_NE(stream, nullptr);
  // Item 1's chunk is not kept, so item 2 cannot find it.
  InsertStreamRequest first;
  *first.add_items() = MakePrioritizedItem(1, "t", 100);
  ASSERT_TRUE(stream->Write(first, {Chunk(100)},
                            InsertStream::Then::kMoreChunksFollow));
  ASSERT_TRUE(seen_.WaitForKeys(1));
  InsertStreamRequest second;
  *second.add_items() = MakePrioritizedItem(2, "t", 100);
  stream->Write(second, {},
                InsertStream::Then::kMoreChunksFollow);  // May already fail.
  ASSERT_TRUE(seen_.WaitForEnd());
  absl::Status status = stream->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(),
            "Could not find sequence chunk 100 for item 2: it was not sent on "
            "this stream or not kept.");
  EXPECT_EQ(seen_.keys(), (std::vector<uint64_t>{1}));
  EXPECT_EQ(table->size(), 1);
}

TEST_F(InsertStreamTest, CloseWaitsForTheOutstandingItems) {
  // A queue of one: the second item waits until the first is sampled.
  std::shared_ptr<Table> table;
  std::unique_ptr<InsertStream> stream;
  ASSERT_NO_FATAL_FAILURE(WriteTwoToAQueueOfOne(table, stream));

  Notification closed;
  absl::Status close_status;
  std::thread closer([&] {
    close_status = stream->Close();
    closed.Notify();
  });
  // Close() is still waiting for item 2 (a wrong Close may end early).
  EXPECT_FALSE(closed.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  EXPECT_EQ(seen_.keys(), (std::vector<uint64_t>{1}));
  auto sampled = table->Sample(absl::Seconds(30));
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_EQ(sampled->ref->item.key(), 1);
  closer.join();
  EXPECT_TRUE(close_status.ok()) << close_status;
  EXPECT_EQ(seen_.keys(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(seen_.ended(), 1);
  ASSERT_EQ(StoredItems(*table).size(), 1);
  EXPECT_EQ(StoredItems(*table)[0].item.key(), 2);
}

TEST_F(InsertStreamTest, CancelEndsTheStreamWithItemsOutstanding) {
  std::shared_ptr<Table> table;
  std::unique_ptr<InsertStream> stream;
  ASSERT_NO_FATAL_FAILURE(WriteTwoToAQueueOfOne(table, stream));
  stream->Cancel();
  absl::Status status = stream->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_EQ(seen_.keys(), (std::vector<uint64_t>{1}));
  EXPECT_EQ(seen_.ended(), 1);
}

TEST_F(InsertStreamTest, DestroyingAnOpenStreamCancelsIt) {
  std::shared_ptr<Table> table;
  std::unique_ptr<InsertStream> stream;
  ASSERT_NO_FATAL_FAILURE(WriteTwoToAQueueOfOne(table, stream));
  stream.reset();  // Would hang if it waited for item 2.
  EXPECT_EQ(seen_.ended(), 1);
}

TEST_F(InsertStreamTest, AStoppingServerEndsTheStreamWithATransientError) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  auto stream = Open();
  ASSERT_NE(stream, nullptr);
  InsertStreamRequest request;
  *request.add_items() = MakePrioritizedItem(1, "t", 100);
  ASSERT_TRUE(stream->Write(request, {Chunk(100)},
                            InsertStream::Then::kMoreChunksFollow));
  ASSERT_TRUE(seen_.WaitForKeys(1));
  server_->Stop();
  ASSERT_TRUE(seen_.WaitForEnd());
  absl::Status status = stream->Finish();
  EXPECT_TRUE(IsTransientError(status)) << status;
}

TEST_F(InsertStreamTest, AnUnreachableServerIsUnavailableWithinTheTimeout) {
  StartServer({FifoTable("t", *MinSizeRateLimiter(1))});
  const int port = server_->port();
  server_->Stop();
  server_.reset();
  auto connection = std::make_shared<Connection>(Address(port));
  const absl::Time start = absl::Now();
  auto stream = InsertStream::Open(connection, absl::Milliseconds(300),
                                   seen_.OnConfirmed(), seen_.OnEnded());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "against a hang only";
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(stream.status().message(),
            "Could not connect to the Reverb server at " + Address(port) +
                " within 300ms.");
  EXPECT_EQ(seen_.ended(), 0);  // No call was made.
}

}  // namespace
}  // namespace deepmind::reverb
