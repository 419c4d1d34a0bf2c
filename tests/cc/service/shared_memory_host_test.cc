#include "cc/service/shared_memory_host.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cc/support/shm_segment.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

// Lends `bytes` as a response; the name lent (empty if none).
std::string LendBytes(SharedMemoryHost::Lender& lender,
                      const std::string& bytes) {
  return lender.LendResponse(bytes.size(), [&bytes](char* out) {
    std::memcpy(out, bytes.data(), bytes.size());
  });
}

// The inode and size of segment `name`, after checking it holds `bytes`
// first.
struct stat Holding(const std::string& name, const std::string& bytes) {
  std::string read(bytes.size(), '\0');
  EXPECT_TRUE(ReadSegment(name, 0, read.data(), read.size()).ok());
  EXPECT_TRUE(read == bytes);
  struct stat info = {};
  EXPECT_EQ(stat(SegmentPath(name).c_str(), &info), 0);
  return info;
}

TEST(SharedMemoryHostTest, ResponsesAreLentFromAFewSegmentsReusedOnceRead) {
  std::unique_ptr<SharedMemoryHost> host = SharedMemoryHost::Create();
  if (host == nullptr) GTEST_SKIP() << "No shared memory here.";
  constexpr int kMax = SharedMemoryHost::kMaxResponseSegments;
  constexpr size_t kStep = SharedMemoryHost::kResponseSegmentStep;
  std::string dir;
  {
    SharedMemoryHost::Lender lender(host.get());
    std::vector<std::string> lent;
    std::set<ino_t> inodes;
    for (int i = 0; i < kMax; ++i) {
      const std::string bytes(200 << 10, static_cast<char>('a' + i));
      lent.push_back(LendBytes(lender, bytes));
      ASSERT_FALSE(lent.back().empty());
      const struct stat info = Holding(lent.back(), bytes);
      EXPECT_EQ(info.st_size, kStep);  // Sized in whole steps.
      inodes.insert(info.st_ino);
    }
    dir = lent[0].substr(0, lent[0].find('/'));
    EXPECT_EQ(dir.rfind(host->prefix() + ".s", 0), 0) << dir;
    // Every segment is out (the client holds its link): distinct files, and
    // the next response goes as bytes.
    EXPECT_EQ(inodes.size(), kMax);
    EXPECT_EQ(LendBytes(lender, std::string(10, 'x')), "");

    // Once the client is done with the third (its link is gone), the next
    // response is written into it, grown to two steps for a larger one.
    const ino_t third = Holding(lent[2], std::string(200 << 10, 'c')).st_ino;
    ASSERT_EQ(unlink(SegmentPath(lent[2]).c_str()), 0);
    const std::string larger(kStep + 1, 'z');
    const std::string name = LendBytes(lender, larger);
    ASSERT_FALSE(name.empty());
    EXPECT_NE(name, lent[2]);
    const struct stat info = Holding(name, larger);
    EXPECT_EQ(info.st_ino, third);
    EXPECT_EQ(info.st_size, 2 * kStep);
    EXPECT_EQ(LendBytes(lender, std::string(10, 'x')), "");
  }
  // The stream's directory goes with its lender.
  EXPECT_TRUE(ListSegments(dir).empty());
  struct stat info;
  EXPECT_NE(stat(SegmentPath(dir).c_str(), &info), 0);
}

TEST(SharedMemoryHostTest, DeadClientsDirectoriesGoWithoutAStreamEnding) {
  // A client killed while its stream's end is seen may still look alive
  // then: the host's thread sweeps again, every kFreeSegmentIdleTime.
  std::unique_ptr<SharedMemoryHost> host = SharedMemoryHost::Create();
  if (host == nullptr) GTEST_SKIP() << "No shared memory here.";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  auto make = [&](int64_t pid) {
    const std::string dir = absl::StrCat(host->prefix(), ".w", pid, "-test");
    EXPECT_EQ(mkdir(SegmentPath(dir).c_str(), 0700), 0);
    const int fd = open(SegmentPath(absl::StrCat(dir, "/0")).c_str(),
                        O_CREAT | O_RDWR, 0600);
    EXPECT_GE(fd, 0);
    close(fd);
    return SegmentPath(dir);
  };
  const std::string dead = make(child);
  const std::string alive = make(getpid());
  struct stat info = {};
  const absl::Time deadline =
      absl::Now() + 3 * SharedMemoryHost::kFreeSegmentIdleTime;
  while (stat(dead.c_str(), &info) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_NE(stat(dead.c_str(), &info), 0) << "still there: " << dead;
  EXPECT_EQ(stat(alive.c_str(), &info), 0);
}

}  // namespace
}  // namespace deepmind::reverb
