// Helpers of the tests that run a real server on loopback: Fifo tables, the
// server and its address, and fixtures holding a server (and a Connection
// to it).
#ifndef REVERB_TESTS_CC_SERVER_TEST_UTIL_H_
#define REVERB_TESTS_CC_SERVER_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cc/client/connection.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/rate_limiter.h"
#include "cc/selectors/fifo.h"
#include "cc/service/server.h"
#include "gtest/gtest.h"

namespace deepmind::reverb::testing {

// A table with Fifo sampler and remover.
inline std::shared_ptr<Table> FifoTable(const std::string& name,
                                        RateLimiter limiter,
                                        int64_t max_size = 1000,
                                        int32_t max_times_sampled = 0) {
  return *Table::Create(name, std::make_unique<FifoSelector>(),
                        std::make_unique<FifoSelector>(), max_size,
                        max_times_sampled, std::move(limiter));
}

// A server on loopback; port 0 picks a free one.
inline absl::StatusOr<std::unique_ptr<Server>> StartLoopbackServer(
    std::vector<std::shared_ptr<Table>> tables, int port = 0) {
  return Server::Start(std::move(tables), port, "localhost");
}

// The address of a server on loopback at `port`.
inline std::string Address(int port) {
  return "localhost:" + std::to_string(port);
}

// Shards: a server on loopback over each of `tables`, appended to
// `servers`; their addresses in order (fewer after a failure, reported).
inline std::vector<std::string> StartLoopbackShards(
    const std::vector<std::shared_ptr<Table>>& tables,
    std::vector<std::unique_ptr<Server>>* servers) {
  std::vector<std::string> addresses;
  for (const auto& table : tables) {
    auto server = StartLoopbackServer({table});
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) break;
    addresses.push_back(Address((*server)->port()));
    servers->push_back(*std::move(server));
  }
  return addresses;
}

// Starts a server on loopback over the tables of each test.
class ServerTest : public ::testing::Test {
 protected:
  // Starts `server_` on `port` (0: a free one).
  void StartServer(std::vector<std::shared_ptr<Table>> tables, int port = 0) {
    auto server = StartLoopbackServer(std::move(tables), port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<Server> server_;
};

// A ServerTest with a Connection to its server.
class ConnectedServerTest : public ServerTest {
 protected:
  // Starts `server_` on `port` (0: a free one) and opens `connection_` to
  // it, unless `connection_` already goes to that port (a server restarted
  // on the port of the last one keeps its connection).
  void StartServer(std::vector<std::shared_ptr<Table>> tables, int port = 0) {
    ServerTest::StartServer(std::move(tables), port);
    if (HasFatalFailure()) return;
    if (connection_ == nullptr || connection_port_ != server_->port()) {
      connection_port_ = server_->port();
      connection_ = std::make_shared<Connection>(Address(connection_port_));
    }
  }

  std::shared_ptr<Connection> connection_;

 private:
  int connection_port_ = 0;
};

// While one exists, REVERB_IN_PROCESS=0: Connections made then never use
// the in-process path (as from another process). The variable's value
// before is restored at the end.
class GrpcOnly {
 public:
  GrpcOnly() {
    if (const char* value = std::getenv("REVERB_IN_PROCESS")) before_ = value;
    setenv("REVERB_IN_PROCESS", "0", 1);
  }
  ~GrpcOnly() {
    if (before_.has_value()) {
      setenv("REVERB_IN_PROCESS", before_->c_str(), 1);
    } else {
      unsetenv("REVERB_IN_PROCESS");
    }
  }

 private:
  std::optional<std::string> before_;
};

}  // namespace deepmind::reverb::testing

#endif  // REVERB_TESTS_CC_SERVER_TEST_UTIL_H_
