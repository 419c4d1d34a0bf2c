// InsertReactor (cc/service/insert_reactor.h) over long streams: the work a
// request costs must not grow with the requests that came before it on the
// stream. Work is counted as heap allocations (operator new, replaced below
// for the whole process: client and server), not timed: a stream of 8 times
// the requests must cost about 8 times as many, where work that grew with
// the stream (copies of what it holds, rescans) would cost 64 times.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "cc/rate_limiters/presets.h"
#include "gtest/gtest.h"
#include "tests/cc/service/stream_test_util.h"

namespace {

std::atomic<int64_t> allocations{0};

void* Allocate(std::size_t size, std::size_t alignment) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  // aligned_alloc wants a size that is a multiple of the alignment.
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(alignment, (size + alignment - 1) /
                                                    alignment * alignment);
  return p;
}

void* AllocateOrThrow(std::size_t size, std::size_t alignment) {
  if (void* p = Allocate(size, alignment)) return p;
  throw std::bad_alloc();
}

}  // namespace

// Every form, so that each allocation is counted and each block is freed by
// the free() matching its malloc() (a sanitizer checks the pairs).
void* operator new(std::size_t size) { return AllocateOrThrow(size, 0); }
void* operator new[](std::size_t size) { return AllocateOrThrow(size, 0); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return Allocate(size, 0);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return Allocate(size, 0);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  return AllocateOrThrow(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return AllocateOrThrow(size, static_cast<std::size_t>(alignment));
}
void* operator new(std::size_t size, std::align_val_t alignment,
                   const std::nothrow_t&) noexcept {
  return Allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment,
                     const std::nothrow_t&) noexcept {
  return Allocate(size, static_cast<std::size_t>(alignment));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t,
                     const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t,
                       const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace deepmind::reverb::testing {
namespace {

class InsertReactorScalingTest : public StreamTest {
 protected:
  void SetUp() override {
    StartServer({FifoTable("free", *MinSizeRateLimiter(1))});
  }

  // Allocations made while one stream sends `n` chunk-only requests, then an
  // item over the last chunk (keeping none), and ends.
  int64_t AllocationsOfStream(uint64_t n) {
    std::vector<grpc::ByteBuffer> requests;
    for (uint64_t key = 1; key <= n; ++key) {
      requests.push_back(InsertRequest({key}, {}, {}));
    }
    const grpc::ByteBuffer item =
        InsertRequest({}, {ItemOf(1, "free", {n})}, {});
    const int64_t before = allocations.load();
    auto call = OpenInsertStream();
    for (const grpc::ByteBuffer& request : requests) {
      EXPECT_TRUE(call->stream->Write(request));
    }
    EXPECT_TRUE(call->stream->Write(item));
    call->stream->WritesDone();
    InsertStreamResponse response;
    EXPECT_TRUE(call->stream->Read(&response));
    EXPECT_EQ(response.keys_size(), 1);
    EXPECT_TRUE(call->stream->Finish().ok());
    return allocations.load() - before;
  }
};

TEST_F(InsertReactorScalingTest, ChunkOnlyRequestsCostTheSameHoweverManyCame) {
  AllocationsOfStream(100);  // Warms up the channel and the server.
  const int64_t short_stream = AllocationsOfStream(1000);
  const int64_t long_stream = AllocationsOfStream(8000);
  EXPECT_GT(long_stream, 4 * short_stream);  // The counter counts.
  EXPECT_LT(long_stream, 12 * short_stream)
      << short_stream << " allocations for 1000 requests, " << long_stream
      << " for 8000";
}

}  // namespace
}  // namespace deepmind::reverb::testing
