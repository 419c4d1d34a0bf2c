#include "cc/support/shm_segment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

bool Exists(const std::string& name) {
  struct stat info;
  return stat(SegmentPath(name).c_str(), &info) == 0;
}

std::string Read(const std::string& name) {
  std::ifstream file(SegmentPath(name));
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

absl::Status Write(const std::string& name, const std::string& bytes,
                   SegmentPool* reuse = nullptr) {
  // In two pieces, as a chunk's head and its tensor content.
  const absl::string_view view(bytes);
  return WriteSegment(
      name, {view.substr(0, view.size() / 2), view.substr(view.size() / 2)},
      reuse);
}

// The pid of a process that has ended (and been reaped).
int64_t DeadPid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

constexpr size_t kNoByteLimit = ~size_t{0};

class ShmSegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = ServerPrefix(RandomToken());
    ASSERT_EQ(mkdir(SegmentPath(Name("pool")).c_str(), 0700), 0);
  }
  void TearDown() override {
    for (const char* name : {"a", "b", "link", "pool", "staged", "probe"}) {
      RemoveSegmentTree(Name(name));
    }
  }
  std::string Name(const std::string& suffix) const {
    return absl::StrCat(prefix_, ".", suffix);
  }

  std::string prefix_;
};

TEST_F(ShmSegmentTest, WrittenSegmentIsOwnerOnlyAndOpensWithItsSize) {
  ASSERT_TRUE(Write(Name("a"), "chunk bytes").ok());
  struct stat info;
  ASSERT_EQ(stat(SegmentPath(Name("a")).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  auto segment = OpenSegmentFile(Name("a"));
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_EQ(segment->size, 11);
  bool released = false;
  {
    auto bytes = MapSegment(*segment, [&released] { released = true; });
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(std::string(*bytes), "chunk bytes");
    EXPECT_FALSE(released);
  }
  EXPECT_TRUE(released);  // With the last copy of the Cord.
  // It must not exist yet.
  EXPECT_FALSE(Write(Name("a"), "again").ok());
}

TEST_F(ShmSegmentTest, MapKeptSegmentKeepsTheMappingForTheNextTime) {
  ASSERT_TRUE(Write(Name("a"), "first bytes").ok());
  SegmentMappings mappings{SegmentMappings::Options()};
  int released = 0;
  const char* first_address = nullptr;
  {
    auto segment = OpenSegmentFile(Name("a"));
    ASSERT_TRUE(segment.ok()) << segment.status();
    bool kept = true;
    auto bytes = MapKeptSegment(
        *segment, mappings, [&] { ++released; }, &kept);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_FALSE(kept);  // Met for the first time.
    EXPECT_EQ(std::string(*bytes), "first bytes");
    first_address = bytes->TryFlat()->data();
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(mappings.size(), 1);
  // The file rewritten (as a writer reuses it), then met again.
  {
    const int fd = open(SegmentPath(Name("a")).c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, "other", 5, 0), 5);
    close(fd);
    auto segment = OpenSegmentFile(Name("a"));
    ASSERT_TRUE(segment.ok()) << segment.status();
    bool kept = false;
    auto bytes = MapKeptSegment(
        *segment, mappings, [&] { ++released; }, &kept);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_TRUE(kept);
    EXPECT_EQ(std::string(*bytes), "other bytes");
    EXPECT_EQ(bytes->TryFlat()->data(), first_address);  // The same mapping.
    EXPECT_EQ(released, 1);
  }
  EXPECT_EQ(released, 2);
}

TEST_F(ShmSegmentTest, OpenRefusesWhatIsNotASegment) {
  EXPECT_TRUE(absl::IsNotFound(OpenSegmentFile(Name("a")).status()));
  ASSERT_TRUE(Write(Name("a"), "x").ok());
  ASSERT_EQ(symlink(SegmentPath(Name("a")).c_str(),
                    SegmentPath(Name("link")).c_str()),
            0);
  EXPECT_FALSE(OpenSegmentFile(Name("link")).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(OpenSegmentFile(Name("pool")).status()));
}

TEST_F(ShmSegmentTest, ReadSegmentReadsARangeOfTheFile) {
  ASSERT_TRUE(Write(Name("a"), "chunk bytes").ok());
  std::string out(5, '\0');
  ASSERT_TRUE(ReadSegment(Name("a"), 6, out.data(), out.size()).ok());
  EXPECT_EQ(out, "bytes");
  // Past its end, a link, or gone: errors.
  EXPECT_TRUE(
      absl::IsInternal(ReadSegment(Name("a"), 7, out.data(), out.size())));
  ASSERT_EQ(symlink(SegmentPath(Name("a")).c_str(),
                    SegmentPath(Name("link")).c_str()),
            0);
  EXPECT_FALSE(ReadSegment(Name("link"), 0, out.data(), 1).ok());
  EXPECT_TRUE(absl::IsNotFound(ReadSegment(Name("b"), 0, out.data(), 1)));
}

TEST_F(ShmSegmentTest, RecycledSegmentIsReusedByTheNextWrite) {
  SegmentPool pool(Name("pool"), 4, kNoByteLimit);
  ASSERT_TRUE(Write(Name("a"), std::string(100, 'a')).ok());
  pool.Recycle(Name("a"), "1");
  EXPECT_FALSE(Exists(Name("a")));
  EXPECT_TRUE(Exists(Name("pool/1-1")));  // Named by its pages.
  ASSERT_TRUE(Write(Name("b"), "short", &pool).ok());
  EXPECT_FALSE(Exists(Name("pool/1-1")));  // Taken, resized, overwritten.
  EXPECT_EQ(Read(Name("b")), "short");
  // With nothing to reuse, a new file.
  RemoveSegmentTree(Name("b"));
  ASSERT_TRUE(Write(Name("b"), "new", &pool).ok());
  EXPECT_EQ(Read(Name("b")), "new");
}

TEST_F(ShmSegmentTest, AWriteTakesAFreeSegmentOfItsPagesFirst) {
  SegmentPool pool(Name("pool"), 4, kNoByteLimit);
  const size_t page = sysconf(_SC_PAGESIZE);
  const std::string one_page(page, '1'), three_pages(3 * page - 5, '3');
  for (const auto& [name, bytes] :
       {std::pair{"b", three_pages}, std::pair{"a", one_page}}) {
    ASSERT_TRUE(Write(Name(name), bytes).ok());
    pool.Recycle(Name(name), name);
  }
  ASSERT_TRUE(Exists(Name("pool/1-a")));
  ASSERT_TRUE(Exists(Name("pool/3-b")));
  // tmpfs lists the newer one of one page first: the one of three is taken.
  const std::string three_again(3 * page, 'x');
  ASSERT_TRUE(Write(Name("link"), three_again, &pool).ok());
  EXPECT_FALSE(Exists(Name("pool/3-b")));
  EXPECT_TRUE(Exists(Name("pool/1-a")));
  EXPECT_EQ(Read(Name("link")), three_again);
  // None of two pages: another one is taken and resized.
  const std::string two_pages(2 * page, 'y');
  ASSERT_TRUE(Write(Name("b"), two_pages, &pool).ok());
  EXPECT_FALSE(Exists(Name("pool/1-a")));
  EXPECT_EQ(Read(Name("b")), two_pages);
}

TEST_F(ShmSegmentTest, SegmentWithAnotherLinkOrAFullPoolIsRemoved) {
  ASSERT_TRUE(Write(Name("a"), "x").ok());
  // A reader's link: the segment must not be overwritten under it.
  ASSERT_EQ(
      link(SegmentPath(Name("a")).c_str(), SegmentPath(Name("link")).c_str()),
      0);
  SegmentPool(Name("pool"), 4, kNoByteLimit).Recycle(Name("a"), "1");
  EXPECT_FALSE(Exists(Name("a")));
  EXPECT_FALSE(Exists(Name("pool/1-1")));
  EXPECT_EQ(Read(Name("link")), "x");  // The reader still reads it.

  // A pool of as many files as it may hold.
  ASSERT_TRUE(Write(Name("pool/1-1"), "1").ok());
  ASSERT_TRUE(Write(Name("a"), "x").ok());
  SegmentPool(Name("pool"), 1, kNoByteLimit).Recycle(Name("a"), "2");
  EXPECT_FALSE(Exists(Name("a")));
  EXPECT_FALSE(Exists(Name("pool/1-2")));

  // A pool of as many bytes: two pages (the file's and one more) fit, three
  // do not.
  const size_t page = sysconf(_SC_PAGESIZE);
  SegmentPool pool(Name("pool"), 4, 2 * page);
  for (const char* more : {"2", "3"}) {
    ASSERT_TRUE(Write(Name("a"), "x").ok());
    pool.Recycle(Name("a"), more);
  }
  EXPECT_TRUE(Exists(Name("pool/1-2")));
  EXPECT_FALSE(Exists(Name("pool/1-3")));
  EXPECT_FALSE(Exists(Name("a")));
}

TEST_F(ShmSegmentTest, PoolTakesFromItsLastListingUntilItRunsOut) {
  SegmentPool pool(Name("pool"), 4, kNoByteLimit);
  for (const char* file : {"1-x", "1-y"}) {
    ASSERT_TRUE(Write(Name(absl::StrCat("pool/", file)), file).ok());
  }
  ASSERT_TRUE(pool.Take(Name("a"), 1));  // Lists both, takes one.
  const std::string taken = Read(Name("a"));
  const std::string other = taken == "1-x" ? "1-y" : "1-x";
  ASSERT_TRUE(Exists(Name(absl::StrCat("pool/", other))));
  // Another writer takes the other one, and the server adds a third.
  ASSERT_EQ(rename(SegmentPath(Name(absl::StrCat("pool/", other))).c_str(),
                   SegmentPath(Name("link")).c_str()),
            0);
  ASSERT_TRUE(Write(Name("pool/1-z"), "1-z").ok());
  // The name listed fails to move: the pool is listed again.
  ASSERT_TRUE(pool.Take(Name("b"), 1));
  EXPECT_EQ(Read(Name("b")), "1-z");
  // Empty, even when listed again.
  EXPECT_FALSE(pool.Take(Name("probe"), 1));
  EXPECT_FALSE(Exists(Name("probe")));
}

TEST_F(ShmSegmentTest, PoolRecyclesAgainOnceWritersTookFromIt) {
  // Room for two: the bound the pool counts reaches them without a listing,
  // then a listing finds what writers took meanwhile.
  SegmentPool pool(Name("pool"), 2, kNoByteLimit);
  for (const char* file : {"1", "2", "3"}) {
    ASSERT_TRUE(Write(Name("a"), file).ok());
    pool.Recycle(Name("a"), file);
    EXPECT_FALSE(Exists(Name("a")));
  }
  EXPECT_TRUE(Exists(Name("pool/1-1")));
  EXPECT_TRUE(Exists(Name("pool/1-2")));
  EXPECT_FALSE(Exists(Name("pool/1-3")));  // Full: removed.
  // A writer takes one (with its own view of the pool).
  ASSERT_TRUE(SegmentPool(Name("pool")).Take(Name("b"), 1));
  ASSERT_TRUE(Write(Name("a"), "4").ok());
  pool.Recycle(Name("a"), "4");
  EXPECT_TRUE(Exists(Name("pool/1-4")));
  EXPECT_EQ(ListSegments(Name("pool")).size(), 2u);
}

TEST_F(ShmSegmentTest, SweepRemovesTheNamesOfServersThatAreGone) {
  // A server started by a test running beside this one sweeps too: the dead
  // server's files are made under a name no sweep takes, moved into place
  // whole, and only their absence is checked (not who removed them).
  const std::string dead = absl::StrCat("reverb-", DeadPid(), "-",
                                        PidNamespace(), "-", RandomToken());
  const std::string staged = Name("staged");
  ASSERT_EQ(mkdir(SegmentPath(staged).c_str(), 0700), 0);
  ASSERT_TRUE(Write(staged + "/0", "x").ok());
  ASSERT_TRUE(Write(Name("probe"), "x").ok());
  // Of another pid namespace: its processes cannot be seen from here.
  const std::string elsewhere =
      absl::StrCat("reverb-", DeadPid(), "-1-", RandomToken(), ".probe");
  ASSERT_TRUE(Write(elsewhere, "x").ok());
  ASSERT_TRUE(Write(Name("a"), "mine").ok());  // This process's.
  ASSERT_EQ(rename(SegmentPath(staged).c_str(),
                   SegmentPath(dead + ".chunks").c_str()),
            0);
  ASSERT_EQ(rename(SegmentPath(Name("probe")).c_str(),
                   SegmentPath(dead + ".probe").c_str()),
            0);

  SweepDeadServers();
  EXPECT_FALSE(Exists(dead + ".chunks"));
  EXPECT_FALSE(Exists(dead + ".probe"));
  EXPECT_TRUE(Exists(elsewhere));
  EXPECT_TRUE(Exists(Name("a")));
  RemoveSegmentTree(elsewhere);
}

TEST(ProcessAliveTest, TellsLiveFromGone) {
  EXPECT_TRUE(ProcessAlive(getpid()));
  EXPECT_FALSE(ProcessAlive(DeadPid()));
}

}  // namespace
}  // namespace deepmind::reverb
