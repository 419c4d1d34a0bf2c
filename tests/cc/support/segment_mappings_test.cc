#include "cc/support/segment_mappings.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cc/support/shm_segment.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

// Writes `bytes` into file `fd` through its kept mapping, as WriteSegment
// does; false if there is none.
bool WriteThrough(SegmentMappings& mappings, int fd, const std::string& bytes) {
  std::shared_ptr<char> mapped = mappings.Find(fd, bytes.size());
  if (mapped == nullptr) return false;
  std::memcpy(mapped.get(), bytes.data(), bytes.size());
  return true;
}

// A writer's options.
SegmentMappings::Options Writable(size_t max_bytes = size_t{1} << 30) {
  SegmentMappings::Options options;
  options.max_bytes = max_bytes;
  options.writable = true;
  options.lasting_names = true;
  return options;
}

class SegmentMappingsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& name : made_) RemoveSegmentTree(name);
  }

  // A segment holding `bytes`, written with pwrite, open for reading and
  // writing.
  int Make(const std::string& bytes) {
    const std::string name = ServerPrefix(RandomToken());
    made_.push_back(name);
    EXPECT_TRUE(WriteSegment(name, {bytes}).ok());
    const int fd = open(SegmentPath(name).c_str(), O_RDWR | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    fds_.push_back(fd);
    return fd;
  }

  static std::string Contents(int fd) {
    std::string bytes(static_cast<size_t>(lseek(fd, 0, SEEK_END)), '\0');
    EXPECT_EQ(pread(fd, bytes.data(), bytes.size(), 0),
              static_cast<ssize_t>(bytes.size()));
    return bytes;
  }

  ~SegmentMappingsTest() override {
    for (int fd : fds_) close(fd);
  }

  std::vector<std::string> made_;
  std::vector<int> fds_;
};

TEST_F(SegmentMappingsTest, AKeptFileIsWrittenThroughItsMapping) {
  SegmentMappings mappings(Writable());
  const std::string first(10000, 'a');
  const int fd = Make(first);
  EXPECT_FALSE(WriteThrough(mappings, fd, std::string(10000, 'b')));
  EXPECT_EQ(Contents(fd), first);  // Nothing written.

  mappings.Keep(fd, first.size());
  EXPECT_EQ(mappings.size(), 1);
  std::string second(10000, 'c');
  second[0] = 'x';
  second[9999] = 'y';
  EXPECT_TRUE(WriteThrough(mappings, fd, second));
  EXPECT_EQ(Contents(fd), second);

  // Shorter, as many pages (the file is sized by its writer first).
  const std::string third(9000, 'd');
  ASSERT_EQ(ftruncate(fd, 9000), 0);
  EXPECT_TRUE(WriteThrough(mappings, fd, third));
  EXPECT_EQ(Contents(fd), third);
}

TEST_F(SegmentMappingsTest, AReadOnlyMappingReadsTheFileAsItIsNow) {
  SegmentMappings mappings(SegmentMappings::Options{});
  const int fd = Make(std::string(10000, 'a'));
  const int read_only = open(SegmentPath(made_.back()).c_str(), O_RDONLY);
  ASSERT_GE(read_only, 0);
  fds_.push_back(read_only);
  EXPECT_EQ(mappings.Find(read_only, 10000), nullptr);
  ASSERT_NE(mappings.Keep(read_only, 10000), nullptr);
  const std::string rewritten(10000, 'b');
  ASSERT_EQ(pwrite(fd, rewritten.data(), rewritten.size(), 0), 10000);
  std::shared_ptr<char> mapped = mappings.Find(read_only, 10000);
  ASSERT_NE(mapped, nullptr);
  EXPECT_EQ(std::string(mapped.get(), 10000), rewritten);
}

TEST_F(SegmentMappingsTest, AFileGrownOrWithHolesIsNotWrittenThrough) {
  SegmentMappings mappings(Writable());
  const int fd = Make(std::string(10000, 'a'));  // Three pages.
  mappings.Keep(fd, 10000);
  ASSERT_EQ(ftruncate(fd, 20000), 0);  // Five, two of them holes.
  EXPECT_FALSE(WriteThrough(mappings, fd, std::string(20000, 'b')));
  EXPECT_EQ(Contents(fd), std::string(10000, 'a') + std::string(10000, '\0'));
  // One page: within the mapping.
  ASSERT_EQ(ftruncate(fd, 3000), 0);
  EXPECT_TRUE(WriteThrough(mappings, fd, std::string(3000, 'b')));
  EXPECT_EQ(Contents(fd), std::string(3000, 'b'));
  // Three again, but two of them holes.
  ASSERT_EQ(ftruncate(fd, 10000), 0);
  EXPECT_FALSE(WriteThrough(mappings, fd, std::string(10000, 'c')));
  EXPECT_EQ(Contents(fd), std::string(3000, 'b') + std::string(7000, '\0'));
}

TEST_F(SegmentMappingsTest, TheLeastRecentlyFoundGoOverTheLimit) {
  SegmentMappings mappings(Writable(3 * 4096));
  const int a = Make(std::string(4096, 'a'));
  const int b = Make(std::string(4096, 'b'));
  const int c = Make(std::string(4096, 'c'));
  mappings.Keep(a, 4096);
  mappings.Keep(b, 4096);
  mappings.Keep(c, 4096);
  EXPECT_TRUE(WriteThrough(mappings, a, std::string(4096, 'A')));
  const int d = Make(std::string(4096, 'd'));
  mappings.Keep(d, 4096);  // b goes: a was found since.
  EXPECT_EQ(mappings.size(), 3);
  EXPECT_TRUE(WriteThrough(mappings, a, std::string(4096, 'A')));
  EXPECT_FALSE(WriteThrough(mappings, b, std::string(4096, 'B')));
  EXPECT_TRUE(WriteThrough(mappings, c, std::string(4096, 'C')));
  EXPECT_TRUE(WriteThrough(mappings, d, std::string(4096, 'D')));
}

TEST_F(SegmentMappingsTest, TheMappingsOfRemovedFilesAreDropped) {
  SegmentMappings mappings(Writable());
  const int kept = Make("kept");
  const int removed = Make("removed");
  mappings.Keep(kept, 4);
  mappings.Keep(removed, 7);
  std::shared_ptr<char> found = mappings.Find(removed, 7);
  ASSERT_NE(found, nullptr);
  ASSERT_EQ(unlink(SegmentPath(made_.back()).c_str()), 0);
  mappings.DropStale();
  EXPECT_EQ(mappings.size(), 1);
  EXPECT_EQ(std::string(found.get(), 7), "removed");  // Still mapped.
  EXPECT_TRUE(WriteThrough(mappings, kept, "KEPT"));
  EXPECT_FALSE(WriteThrough(mappings, removed, "REMOVED"));
}

TEST_F(SegmentMappingsTest, WithoutLastingNamesMappingsGoByTimeAlone) {
  SegmentMappings::Options options;
  options.max_idle = absl::Milliseconds(200);
  SegmentMappings mappings(options);
  const int removed = Make("removed");
  const int found = Make("found");
  const int idle = Make("idle");
  mappings.Keep(removed, 7);
  mappings.Keep(found, 5);
  mappings.Keep(idle, 4);
  // Removed: a sampler's link, while the server's name stays.
  ASSERT_EQ(unlink(SegmentPath(made_[0]).c_str()), 0);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_NE(mappings.Find(found, 5), nullptr);
  ASSERT_NE(mappings.Find(removed, 7), nullptr);
  mappings.DropStale();
  EXPECT_EQ(mappings.size(), 2);
  EXPECT_EQ(mappings.Find(idle, 4), nullptr);
  std::shared_ptr<char> mapped = mappings.Find(removed, 7);
  ASSERT_NE(mapped, nullptr);
  EXPECT_EQ(std::string(mapped.get(), 7), "removed");
}

TEST_F(SegmentMappingsTest, ItsThreadDropsThemOnItsOwn) {
  SegmentMappings mappings(Writable());
  mappings.Keep(Make("removed"), 7);
  ASSERT_EQ(unlink(SegmentPath(made_.back()).c_str()), 0);
  for (int i = 0; i < 100 && mappings.size() > 0; ++i) usleep(100'000);
  EXPECT_EQ(mappings.size(), 0);
}

TEST_F(SegmentMappingsTest, ThreadsWriteTheirOwnFilesWhileOthersAreDropped) {
  SegmentMappings::Options options = Writable(8 * 4096);  // Some evicted.
  options.max_idle = absl::Milliseconds(1);
  SegmentMappings mappings(options);
  constexpr int kThreads = 4;
  std::vector<int> fds;
  for (int i = 0; i < kThreads * 3; ++i) fds.push_back(Make("x"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 300; ++round) {
        const int fd = fds[t * 3 + round % 3];
        const std::string bytes(1, static_cast<char>('a' + round % 26));
        if (!WriteThrough(mappings, fd, bytes)) {
          ASSERT_EQ(pwrite(fd, bytes.data(), 1, 0), 1);
          mappings.Keep(fd, 1);
        }
        ASSERT_EQ(Contents(fd), bytes);
      }
    });
  }
  for (int round = 0; round < 100; ++round) mappings.DropStale();
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(mappings.size(), 8);
}

TEST_F(SegmentMappingsTest, WriteSegmentWritesAPooledFileThroughItsMapping) {
  SegmentMappings mappings(Writable());
  const std::string prefix = ServerPrefix(RandomToken());
  const std::string pool = absl::StrCat(prefix, ".pool");
  made_.push_back(pool);
  ASSERT_EQ(mkdir(SegmentPath(pool).c_str(), 0700), 0);
  SegmentPool free(pool, 4, ~size_t{0});
  for (int round = 0; round < 3; ++round) {
    const std::string name = absl::StrCat(prefix, ".", round);
    made_.push_back(name);
    const std::string bytes(20000, static_cast<char>('a' + round));
    const absl::string_view view(bytes);
    ASSERT_TRUE(WriteSegment(name, {view.substr(0, 5), view.substr(5)}, &free,
                             &mappings)
                    .ok());
    auto segment = OpenSegmentFile(name);
    ASSERT_TRUE(segment.ok()) << segment.status();
    EXPECT_EQ(Contents(segment->fd), bytes);
    // One file all along, mapped once.
    EXPECT_EQ(mappings.size(), 1);
    free.Recycle(name, absl::StrCat(round));
  }
}

}  // namespace
}  // namespace deepmind::reverb
