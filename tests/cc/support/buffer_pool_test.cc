#include "cc/support/buffer_pool.h"

#include <string>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

constexpr size_t kLarge = BufferPool::kMinBytes * 4;

TEST(BufferPoolTest, LargeBuffersComeBack) {
  BufferPool pool(absl::InfiniteDuration());
  std::string buffer = pool.Take(kLarge);
  EXPECT_EQ(buffer.size(), kLarge);
  // Room for a quarter more, so that compressed bytes fit later.
  EXPECT_GE(buffer.capacity(), kLarge + kLarge / 4);
  const char* data = buffer.data();
  pool.Give(std::move(buffer));
  EXPECT_EQ(pool.kept_bytes(), kLarge + kLarge / 4);
  std::string again = pool.Take(kLarge + 10);
  EXPECT_EQ(again.data(), data);
  EXPECT_EQ(again.size(), kLarge + 10);
  EXPECT_EQ(pool.kept_bytes(), 0);
}

TEST(BufferPoolTest, ReserveGivesAnEmptyBufferToAppendTo) {
  BufferPool pool(absl::InfiniteDuration());
  std::string buffer = pool.Take(kLarge);
  const char* data = buffer.data();
  pool.Give(std::move(buffer));
  std::string reserved = pool.Reserve(kLarge);
  EXPECT_TRUE(reserved.empty());
  reserved.append(kLarge, 'x');
  EXPECT_EQ(reserved.data(), data);  // The kept buffer, no reallocation.
  // Small ones are plain strings of that capacity.
  std::string small = pool.Reserve(100);
  EXPECT_TRUE(small.empty());
  EXPECT_GE(small.capacity(), 100);
}

TEST(BufferPoolTest, TakesTheSmallestBufferThatFits) {
  BufferPool pool(absl::InfiniteDuration());
  std::string big = pool.Take(4 * kLarge);
  std::string small = pool.Take(kLarge);
  const char* big_data = big.data();
  const char* small_data = small.data();
  pool.Give(std::move(big));
  pool.Give(std::move(small));
  EXPECT_EQ(pool.Take(kLarge / 2).data(), small_data);
  EXPECT_EQ(pool.Take(2 * kLarge).data(), big_data);
}

TEST(BufferPoolTest, ABufferServesRequestsOfAQuarterOfItsSizeOrMore) {
  BufferPool pool(absl::InfiniteDuration());
  std::string big = pool.Take(8 * kLarge);
  const char* big_data = big.data();
  const size_t capacity = big.capacity();
  pool.Give(std::move(big));
  EXPECT_EQ(pool.given_kept(), 1);
  // Too small for it: a new buffer, and the big one stays for a batch.
  EXPECT_NE(pool.Take(capacity / 4 - 1).data(), big_data);
  EXPECT_EQ(pool.kept_bytes(), capacity);
  EXPECT_EQ(pool.reused(), 0);
  EXPECT_EQ(pool.Take(capacity / 4).data(), big_data);
  EXPECT_EQ(pool.reused(), 1);
}

TEST(BufferPoolTest, LargeNewBuffersAreUsable) {
  // Huge pages are a hint (madvise): the buffer works whatever the kernel
  // does with it.
  BufferPool pool(absl::InfiniteDuration());
  std::string buffer = pool.Take(BufferPool::kHugePageMinBytes * 3);
  buffer.assign(buffer.size(), 'x');
  EXPECT_EQ(buffer.find_first_not_of('x'), std::string::npos);
}

TEST(BufferPoolTest, KeepsNeitherSmallBuffersNorMoreThanItsLimit) {
  BufferPool pool(absl::InfiniteDuration());
  pool.Give(std::string(BufferPool::kMinBytes / 2, 'x'));
  EXPECT_EQ(pool.kept_bytes(), 0);
  // A small Take is a plain string.
  EXPECT_EQ(pool.Take(10).size(), 10);
  size_t given = 0;
  while (given <= BufferPool::kMaxBytes) {
    std::string buffer(16 << 20, 'x');
    given += buffer.capacity();
    pool.Give(std::move(buffer));
  }
  EXPECT_LE(pool.kept_bytes(), BufferPool::kMaxBytes);
  EXPECT_GT(pool.kept_bytes(), BufferPool::kMaxBytes - (16 << 20) - 1);
}

TEST(BufferPoolTest, IdleBuffersAreFreed) {
  BufferPool pool(absl::ZeroDuration());
  pool.Give(pool.Take(kLarge));
  EXPECT_GT(pool.kept_bytes(), 0);
  absl::SleepFor(absl::Milliseconds(2));
  // The next Take (or Give) frees what has been idle for longer than
  // max_idle, and so does not get that buffer.
  std::string fresh = pool.Take(kLarge);
  EXPECT_EQ(pool.kept_bytes(), 0);
}

}  // namespace
}  // namespace deepmind::reverb
