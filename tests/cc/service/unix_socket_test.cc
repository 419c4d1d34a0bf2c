// A server on a unix domain socket: clients over `unix:PATH` (writers,
// samples, server info), TCP and the socket served at once, the socket
// file removed at shutdown, a stale socket file replaced at start, and the
// paths that are refused.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cc/client/chunker.h"
#include "cc/client/client.h"
#include "cc/client/trajectory_writer.h"
#include "cc/rate_limiters/presets.h"
#include "cc/service/server.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

std::string Target(const std::string& path) { return "unix:" + path; }

using testing::Address;
using testing::FifoTable;
using testing::Int32;
using testing::Values;

bool Exists(const std::string& path) {
  struct stat file;
  return lstat(path.c_str(), &file) == 0;
}

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/reverb-unix-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/server.sock";
  }

  void TearDown() override {
    unlink(path_.c_str());
    rmdir(directory_.c_str());
  }

  absl::StatusOr<std::unique_ptr<Server>> Start(std::optional<int> port) {
    ServerOptions options;
    options.port = port;
    options.unix_socket_path = path_;
    return Server::Start({FifoTable("t", *MinSizeRateLimiter(1),
                                    /*max_size=*/1000,
                                    /*max_times_sampled=*/1)},
                         std::move(options));
  }

  // Writes items of the steps 0..count-1 through `client`, then samples
  // them back in order.
  static void WriteAndSample(Client& client, int count) {
    Write(client, count);
    if (::testing::Test::HasFatalFailure()) return;
    SampleBack(client, count);
  }

  // Writes items of the steps 0..count-1 through `client`.
  static void Write(Client& client, int count) {
    auto writer = client.NewTrajectoryWriter(
        std::make_shared<ConstantChunkerOptions>(2, 2));
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int32_t t = 0; t < count; ++t) {
      auto refs =
          (*writer)->Append({std::optional<TensorView>(Int32({t}, {}))});
      ASSERT_TRUE(refs.ok()) << refs.status();
      ASSERT_TRUE((*writer)->CreateItem("t", 1, {{{*(*refs)[0]}}}).ok());
    }
    ASSERT_TRUE((*writer)->Flush(0, absl::Seconds(30)).ok());
    auto info = client.ServerInfo(absl::Seconds(30));
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->table_info(0).current_size(), count);
  }

  // Samples the items of Write(client, count) in order.
  static void SampleBack(Client& client, int count) {
    SamplerOptions options;
    options.max_samples = count;
    auto sampler = client.NewSampler("t", options);
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    for (int32_t t = 0; t < count; ++t) {
      auto sample = (*sampler)->GetNextSample(absl::Seconds(30));
      ASSERT_TRUE(sample.ok()) << sample.status();
      EXPECT_EQ(Values<int32_t>(sample->columns[0]), (std::vector<int32_t>{t}));
    }
  }

  std::string directory_;
  std::string path_;
};

TEST_F(UnixSocketTest, OnlyTheUnixSocketServesWritersSamplesAndInfo) {
  auto server = Start(std::nullopt);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), 0);
  EXPECT_EQ((*server)->unix_socket_path(), path_);
  Client client(Target(path_));
  WriteAndSample(client, 3);
  // The three-slash spelling names the same socket.
  Client uri("unix://" + path_);
  Write(uri, 1);
}

TEST_F(UnixSocketTest, TcpAndTheUnixSocketServeTheSameTables) {
  auto server = Start(0);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE((*server)->port(), 0);
  Client unix_client(Target(path_));
  Write(unix_client, 2);
  // A sharded client over both addresses of the one server.
  auto both = Client::Create({Target(path_), Address((*server)->port())});
  ASSERT_TRUE(both.ok()) << both.status();
  auto shards = (*both)->ShardInfo(absl::Seconds(30));
  ASSERT_EQ(shards.size(), 2);
  for (const auto& shard : shards) {
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(shard->table_info(0).current_size(), 2);
  }
  Client tcp_client(Address((*server)->port()));
  SampleBack(tcp_client, 2);
}

TEST_F(UnixSocketTest, StopAndTheDestructorRemoveTheSocketFile) {
  auto server = Start(std::nullopt);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(Exists(path_));
  (*server)->Stop();
  EXPECT_FALSE(Exists(path_));

  auto again = Start(0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(Exists(path_));
  again->reset();
  EXPECT_FALSE(Exists(path_));
}

TEST_F(UnixSocketTest, AStaleSocketFileIsReplaced) {
  // What a killed server leaves: a socket file nobody listens on.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, path_.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  close(fd);
  ASSERT_TRUE(Exists(path_));

  auto server = Start(std::nullopt);
  ASSERT_TRUE(server.ok()) << server.status();
  Client client(Target(path_));
  WriteAndSample(client, 1);
}

TEST_F(UnixSocketTest, ALiveServersSocketIsNotTaken) {
  auto first = Start(std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Start(std::nullopt);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("already listening"),
            std::string::npos)
      << second.status();
  // The first server still has its socket.
  Client client(Target(path_));
  WriteAndSample(client, 1);
}

TEST_F(UnixSocketTest, ARegularFileIsAnErrorAndStays) {
  std::ofstream(path_) << "data";
  auto server = Start(std::nullopt);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("not a socket"), std::string::npos)
      << server.status();
  std::ifstream file(path_);
  std::string text;
  file >> text;
  EXPECT_EQ(text, "data");
}

TEST_F(UnixSocketTest, BadPathsAndNoListenerAreInvalidArguments) {
  ServerOptions none;
  none.port = std::nullopt;
  EXPECT_EQ(Server::Start({FifoTable("t", *MinSizeRateLimiter(1))}, none)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ServerOptions no_directory;
  no_directory.unix_socket_path = directory_ + "/missing/server.sock";
  auto missing =
      Server::Start({FifoTable("t", *MinSizeRateLimiter(1))}, no_directory);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("directory does not exist"),
            std::string::npos)
      << missing.status();
  ServerOptions long_path;
  long_path.unix_socket_path = directory_ + "/" + std::string(200, 'x');
  EXPECT_EQ(Server::Start({FifoTable("t", *MinSizeRateLimiter(1))}, long_path)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepmind::reverb
