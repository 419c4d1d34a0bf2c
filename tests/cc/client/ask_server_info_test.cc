#include "cc/client/ask_server_info.h"

#include <memory>
#include <string>
#include <vector>

#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/uniform.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb {
namespace {

using ::deepmind::reverb::testing::Address;
using ::deepmind::reverb::testing::MakeItem;
using ::deepmind::reverb::testing::StartLoopbackServer;

std::shared_ptr<Table> TableOf(const std::string& name, int items) {
  auto table = *Table::Create(name, std::make_unique<UniformSelector>(),
                              std::make_unique<FifoSelector>(), 100, 0,
                              *MinSizeRateLimiter(1));
  for (int key = 0; key < items; ++key) {
    EXPECT_TRUE(table->InsertOrAssign(MakeItem(key)).ok());
  }
  return table;
}

void Prepare(int, grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
}

TEST(AskServerInfoTest, EachServerAnswersInTheOrderOfTheConnections) {
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<std::shared_ptr<const Connection>> connections;
  for (int s = 0; s < 3; ++s) {
    auto server = StartLoopbackServer({TableOf("t" + std::to_string(s), s)});
    ASSERT_TRUE(server.ok()) << server.status();
    connections.push_back(
        std::make_shared<Connection>(Address((*server)->port())));
    servers.push_back(*std::move(server));
  }
  std::vector<int> prepared;
  auto infos =
      AskServerInfo(connections, [&](int s, grpc::ClientContext* context) {
        prepared.push_back(s);
        Prepare(s, context);
      });
  EXPECT_EQ(prepared, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(infos.size(), 3);
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(infos[s].ok()) << infos[s].status();
    ASSERT_EQ(infos[s]->table_info_size(), 1);
    EXPECT_EQ(infos[s]->table_info(0).name(), "t" + std::to_string(s));
    EXPECT_EQ(infos[s]->table_info(0).current_size(), s);
  }
}

TEST(AskServerInfoTest, AServerThatIsGoneIsItsErrorAlone) {
  auto server = StartLoopbackServer({TableOf("t", 2)});
  ASSERT_TRUE(server.ok()) << server.status();
  auto gone = StartLoopbackServer({TableOf("t", 0)});
  ASSERT_TRUE(gone.ok()) << gone.status();
  const std::string gone_address = Address((*gone)->port());
  (*gone)->Stop();
  gone->reset();
  std::vector<std::shared_ptr<const Connection>> connections = {
      std::make_shared<Connection>(gone_address),
      std::make_shared<Connection>(Address((*server)->port()))};
  auto infos = AskServerInfo(connections, Prepare);
  ASSERT_EQ(infos.size(), 2);
  EXPECT_TRUE(absl::IsUnavailable(infos[0].status())) << infos[0].status();
  ASSERT_TRUE(infos[1].ok()) << infos[1].status();
  EXPECT_EQ(infos[1]->table_info(0).current_size(), 2);
}

TEST(AskServerInfoTest, NoConnectionsIsNoAnswers) {
  EXPECT_TRUE(AskServerInfo({}, Prepare).empty());
}

}  // namespace
}  // namespace deepmind::reverb
