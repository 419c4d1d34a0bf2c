#include "cc/service/arena_messages.h"

#include <string>

#include "gtest/gtest.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {
namespace {

using Messages =
    ArenaMessages<MutatePrioritiesRequest, MutatePrioritiesResponse>;

TEST(ArenaMessagesTest, ParsedSubMessagesLiveOnTheCallsArena) {
  MutatePrioritiesRequest sent;
  sent.set_table("table");
  for (int i = 0; i < 100; ++i) {
    KeyWithPriority* update = sent.add_updates();
    update->set_key(i);
    update->set_priority(0.5 * i);
  }
  Messages messages;
  auto* holder = messages.AllocateMessages();
  MutatePrioritiesRequest* request = holder->request();
  ASSERT_TRUE(request->ParseFromString(sent.SerializeAsString()));

  google::protobuf::Arena* arena = request->GetArena();
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(holder->response()->GetArena(), arena);
  ASSERT_EQ(request->updates_size(), 100);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(request->updates(i).GetArena(), arena);
    EXPECT_EQ(request->updates(i).key(), static_cast<uint64_t>(i));
    EXPECT_EQ(request->updates(i).priority(), 0.5 * i);
  }
  EXPECT_EQ(request->table(), "table");
  holder->Release();
}

TEST(ArenaMessagesTest, EachCallHasAnArenaOfItsOwn) {
  Messages messages;
  auto* first = messages.AllocateMessages();
  auto* second = messages.AllocateMessages();
  EXPECT_NE(first->request()->GetArena(), second->request()->GetArena());
  first->Release();
  second->Release();
}

}  // namespace
}  // namespace deepmind::reverb
