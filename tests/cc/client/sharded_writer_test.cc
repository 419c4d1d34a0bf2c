// Both writers of a Client over three shards (servers in the test's
// process, which the writers use directly; ctest runs the tests over gRPC
// too): where they write, failing over when a shard stops (and comes back,
// or not) and moving off an overloaded shard at an episode end. Every item
// carries a unique id in its data (its last step), so that the tests count what
// each table holds.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cc/client/client.h"
#include "cc/client/connection.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/uniform.h"
#include "cc/support/mutex.h"
#include "cc/support/status_macros.h"
#include "cc/wire/grpc_status.h"
#include "gtest/gtest.h"
#include "tests/cc/client/freezable_proxy.h"
#include "tests/cc/client/writer_test_util.h"

namespace deepmind::reverb {
namespace {

using ::deepmind::reverb::testing::Address;
using ::deepmind::reverb::testing::FreezableProxy;
using ::deepmind::reverb::testing::GrpcOnly;
using ::deepmind::reverb::testing::Int32;
using ::deepmind::reverb::testing::MakeInt32Item;
using ::deepmind::reverb::testing::StartLoopbackServer;
using ::deepmind::reverb::testing::StartLoopbackShards;
using ::deepmind::reverb::testing::StoredItems;
using ::deepmind::reverb::testing::WaitFor;

constexpr int kShards = 3;
constexpr char kTable[] = "table";
constexpr absl::Duration kTimeout = absl::Seconds(60);
// Steps per episode of the writers below.
constexpr int kEpisodeSteps = 10;

std::shared_ptr<Table> MakeTable() {
  return *Table::Create(kTable, std::make_unique<UniformSelector>(),
                        std::make_unique<FifoSelector>(), 1'000'000, 0,
                        *MinSizeRateLimiter(1));
}

// What a shard restarted from a checkpoint of `table` holds: a new table
// with its items and chunks (the old one was closed as its server stopped).
std::shared_ptr<Table> Restored(const Table& table) {
  Table::CheckpointData data = table.Checkpoint();
  std::map<uint64_t, std::shared_ptr<Chunk>> chunks;
  for (auto& chunk : data.chunks) chunks[chunk->key()] = chunk;
  std::vector<TableItem> items;
  for (PrioritizedItem& item : data.items) {
    TableItem restored;
    for (uint64_t key : GetChunkKeys(item.flat_trajectory())) {
      restored.chunks.push_back(chunks[key]);
    }
    restored.item = std::move(item);
    items.push_back(std::move(restored));
  }
  std::shared_ptr<Table> copy = MakeTable();
  EXPECT_TRUE(copy->Restore(data.table, std::move(items),
                            /*use_checkpoint_options=*/false)
                  .ok());
  return copy;
}

// `n` items with ids [first, first + n) through a TrajectoryWriter: item i
// covers steps i - 1 and i of its episode (so items share chunks), the id
// being step i's value; episodes of kEpisodeSteps; flushed.
absl::Status WriteTrajectories(TrajectoryWriter& writer, int32_t first, int n) {
  std::weak_ptr<CellRef> previous;
  for (int i = 0; i < n; ++i) {
    REVERB_ASSIGN_OR_RETURN(
        auto refs,
        writer.Append({std::optional<TensorView>(Int32({first + i}, {}))}));
    std::vector<std::weak_ptr<CellRef>> cells;
    if (i % kEpisodeSteps > 0) cells.push_back(previous);
    cells.push_back(*refs[0]);
    REVERB_RETURN_IF_ERROR(writer.CreateItem(kTable, 1, {{cells}}));
    previous = *refs[0];
    if (i % kEpisodeSteps == kEpisodeSteps - 1) {
      REVERB_RETURN_IF_ERROR(writer.EndEpisode(false, kTimeout));
    }
  }
  return writer.Flush(0, kTimeout);
}

WriterOptions LegacyOptions() {
  WriterOptions options;
  options.chunk_length = 1;
  options.max_timesteps = 2;
  return options;
}

// Binds a loopback port (IPv4 and IPv6, as a server on "localhost" does)
// without listening: a connection to it is refused, and no other socket can
// be given the port while it is held.
class PortHold {
 public:
  explicit PortHold(int port) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    v4.sin_port = htons(port);
    Bind(AF_INET, reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_addr = in6addr_loopback;
    v6.sin6_port = htons(port);
    Bind(AF_INET6, reinterpret_cast<sockaddr*>(&v6), sizeof(v6));
  }
  ~PortHold() {
    for (int fd : fds_) close(fd);
  }

 private:
  // SO_REUSEADDR lets the bind past the stopped server's connections in
  // TIME_WAIT; a server picking a free port still passes a bound one by.
  void Bind(int family, const sockaddr* address, socklen_t length) {
    const int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) return;  // A family the host lacks: nobody can take it.
    fds_.push_back(fd);
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (family == AF_INET6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    }
    bind(fd, address, length);
  }

  std::vector<int> fds_;
};

class ShardedWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int s = 0; s < kShards; ++s) tables_.push_back(MakeTable());
    const std::vector<std::string> addresses =
        StartLoopbackShards(tables_, &servers_);
    ASSERT_EQ(addresses.size(), kShards);
    for (const auto& server : servers_) ports_.push_back(server->port());
    auto client = Client::Create(addresses);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Stops the server of `shard` and holds its port until Restart, so that
  // the writers, which go on dialling it, meet a refusal and not a server
  // another test (ctest -j2) started on the freed port.
  void Stop(int shard) {
    servers_[shard]->Stop();
    servers_[shard].reset();
    holds_[shard] = std::make_unique<PortHold>(ports_[shard]);
  }

  // On the same port, from a checkpoint of what the shard held.
  void Restart(int shard) {
    holds_[shard].reset();
    tables_[shard] = Restored(*tables_[shard]);
    auto server = StartLoopbackServer({tables_[shard]}, ports_[shard]);
    ASSERT_TRUE(server.ok()) << server.status();
    servers_[shard] = *std::move(server);
  }

  // The ids of the writers' items in the table of `shard`, with repeats.
  std::multiset<int32_t> Ids(int shard) const {
    std::multiset<int32_t> ids;
    for (const auto& stored : StoredItems(*tables_[shard])) {
      if (!stored.columns.empty() && stored.columns[0].back() >= 0) {
        ids.insert(stored.columns[0].back());
      }
    }
    return ids;
  }

  // Of each id in [0, n): how many of the tables of `shards` hold it,
  // grouped by that count (so {{1, n}} means each exactly once).
  std::map<int, int> Copies(const std::vector<int>& shards, int n) const {
    std::vector<int> copies(n);
    for (int s : shards) {
      for (int32_t id : Ids(s)) {
        if (id < n) ++copies[id];
      }
    }
    std::map<int, int> histogram;
    for (int c : copies) ++histogram[c];
    return histogram;
  }

  // Runs `write(w)` for writers w in [0, num_writers) on threads of their
  // own; the statuses.
  template <typename Write>
  static std::vector<absl::Status> RunWriters(int num_writers, Write write) {
    std::vector<absl::Status> statuses(num_writers);
    std::vector<std::thread> threads;
    for (int w = 0; w < num_writers; ++w) {
      threads.emplace_back([&, w] { statuses[w] = write(w); });
    }
    for (auto& thread : threads) thread.join();
    return statuses;
  }

  // Items in the tables of every shard but `shard`.
  int64_t ItemsElsewhere(int shard) const {
    int64_t items = 0;
    for (int s = 0; s < kShards; ++s) {
      if (s != shard) items += tables_[s]->size();
    }
    return items;
  }

  // Fills shard 0 with enough items (id -1) for writers to leave it, and
  // waits until the client has seen them.
  void OverloadShard0() {
    const int64_t overload = Shards::kRebalanceMinItems + 100;
    for (int64_t i = 0; i < overload; ++i) {
      ASSERT_TRUE(tables_[0]->InsertOrAssign(MakeInt32Item(i + 1, 1, -1)).ok());
    }
    ASSERT_TRUE(
        WaitFor([&] { return client_->shards()->NumItems(0) == overload; }));
  }

  // The shard whose table holds the item `id`; -1 if none.
  int Where(int32_t id) const {
    for (int s = 0; s < kShards; ++s) {
      if (Ids(s).count(id) > 0) return s;
    }
    return -1;
  }

  std::vector<std::shared_ptr<Table>> tables_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<PortHold> holds_[kShards];
  std::unique_ptr<Client> client_;
};

std::shared_ptr<ChunkerOptions> ChunksOfTwo() {
  return std::make_shared<ConstantChunkerOptions>(/*max_chunk_length=*/2,
                                                  /*num_keep_alive_refs=*/2);
}

// One writer of either kind, as the parameterised tests drive it.
class TestWriter {
 public:
  virtual ~TestWriter() = default;
  // Items with ids [first, first + n) in episodes of kEpisodeSteps, every
  // one confirmed on return (see WriteTrajectories, WriteLegacySteps).
  virtual absl::Status Write(int32_t first, int n) = 0;
  // Ends the episode: where a writer may move to another shard.
  virtual absl::Status EndEpisode() = 0;
  // Done writing: a legacy Writer is closed; a TrajectoryWriter needs
  // nothing after its flush.
  virtual absl::Status Close() = 0;
};

class TrajectoryTestWriter : public TestWriter {
 public:
  explicit TrajectoryTestWriter(std::unique_ptr<TrajectoryWriter> writer)
      : writer_(std::move(writer)) {}
  absl::Status Write(int32_t first, int n) override {
    return WriteTrajectories(*writer_, first, n);
  }
  absl::Status EndEpisode() override {
    return writer_->EndEpisode(/*clear_buffers=*/false, kTimeout);
  }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  std::unique_ptr<TrajectoryWriter> writer_;
};

// Chunks of one step, items of up to two steps (item i covers steps i - 1
// and i of its episode), each episode flushed before the next.
class LegacyTestWriter : public TestWriter {
 public:
  explicit LegacyTestWriter(std::unique_ptr<Writer> writer)
      : writer_(std::move(writer)) {}
  absl::Status Write(int32_t first, int n) override {
    for (int i = 0; i < n; ++i) {
      REVERB_RETURN_IF_ERROR(writer_->Append({Int32({first + i}, {})}));
      REVERB_RETURN_IF_ERROR(
          writer_->CreateItem(kTable, i % kEpisodeSteps > 0 ? 2 : 1, 1));
      if (i % kEpisodeSteps == kEpisodeSteps - 1) {
        REVERB_RETURN_IF_ERROR(writer_->Flush(kTimeout));
        REVERB_RETURN_IF_ERROR(writer_->NewEpisode());
      }
    }
    return writer_->Flush(kTimeout);
  }
  absl::Status EndEpisode() override { return writer_->NewEpisode(); }
  absl::Status Close() override { return writer_->Close(kTimeout); }

 private:
  std::unique_ptr<Writer> writer_;
};

TEST_F(ShardedWriterTest, SixTrajectoryWritersWriteTwoToAShardEachItemOnce) {
  constexpr int kItems = 100;
  constexpr int kWriters = 6;
  // Every writer holds its shard (from its first item) before any finishes
  // and gives its shard back: on a slow machine a writer could otherwise
  // be done before the last one starts.
  Mutex mu;
  int placed = 0;
  // Writers join shards that are up: wait until a refresh has reached every
  // shard (under a loaded sanitizer run, one failed the client's first
  // refresh, and the writers made meanwhile went to the other two).
  client_->shards()->GetWeights(kTable);
  ASSERT_TRUE(WaitFor([&] {
    for (int s = 0; s < kShards; ++s) {
      if (!client_->shards()->IsUp(s)) return false;
    }
    return true;
  }));
  std::vector<absl::Status> statuses = RunWriters(kWriters, [&](int w) {
    auto writer = client_->NewTrajectoryWriter(ChunksOfTwo());
    if (!writer.ok()) return writer.status();
    REVERB_RETURN_IF_ERROR(WriteTrajectories(**writer, w * kItems, 1));
    {
      MutexLock lock(&mu);
      ++placed;
      const auto all_placed = +[](int* n) { return *n == kWriters; };
      if (!mu.AwaitWithTimeout(absl::Condition(all_placed, &placed),
                               kTimeout)) {
        return absl::DeadlineExceededError("The writers were not placed.");
      }
    }
    return WriteTrajectories(**writer, w * kItems + 1, kItems - 1);
  });
  for (const auto& status : statuses) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(Copies({0, 1, 2}, 6 * kItems), (std::map<int, int>{{1, 600}}));
  for (int s = 0; s < kShards; ++s) {
    std::set<int> writers;
    for (int32_t id : Ids(s)) writers.insert(id / kItems);
    EXPECT_EQ(writers.size(), 2) << "shard " << s;
    // Handed to the tables directly, or all over gRPC.
    EXPECT_EQ(tables_[s]->info().num_local_inserts(),
              InProcessAllowed() ? 2 * kItems : 0)
        << "shard " << s;
  }
}

// Shard 1 freezes (see WritersLeaveAFrozenShardThatThenDeletes) while the
// writer there has items queued behind its rate limiter: they are sent
// again elsewhere, and shard 1 must not insert them once its rate limiter
// lets it. (Items shard 1 stored just before the freeze may have their
// confirmations held back by it: the writer cannot tell those from items
// not stored, and sends them again too; the client deletes them on shard 1
// when it rejoins.)
TEST_F(ShardedWriterTest, AFrozenShardDoesNotStoreLaterWhatItHeldQueued) {
  constexpr int kItems = 100;
  constexpr int kAllowed = 50;  // Inserts shard 1 takes before a sample.
  Stop(1);
  tables_[1] = *Table::Create(kTable, std::make_unique<UniformSelector>(),
                              std::make_unique<FifoSelector>(), 1000, 0,
                              *QueueRateLimiter(kAllowed));
  auto server = StartLoopbackServer({tables_[1]}, ports_[1]);
  ASSERT_TRUE(server.ok()) << server.status();
  servers_[1] = *std::move(server);
  // The test's and the server's; an insert stream holds one more.
  const long unused = tables_[1].use_count();
  GrpcOnly grpc_only;
  FreezableProxy proxy(ports_[1]);
  client_ = *Client::Create(
      {Address(ports_[0]), Address(proxy.port()), Address(ports_[2])});
  std::thread chaos([&] {
    ASSERT_TRUE(WaitFor([&] { return tables_[1]->size() >= kAllowed; }));
    proxy.Freeze();
  });
  // One writer on each shard.
  std::vector<absl::Status> statuses = RunWriters(3, [&](int w) {
    auto writer = client_->NewTrajectoryWriter(ChunksOfTwo());
    if (!writer.ok()) return writer.status();
    return WriteTrajectories(**writer, w * kItems, kItems);
  });
  chaos.join();
  for (const auto& status : statuses) EXPECT_TRUE(status.ok()) << status;
  proxy.Thaw();
  // The cancel of the stream that left shard 1 reaches its server, which
  // lets the stream go.
  ASSERT_TRUE(WaitFor([&] { return tables_[1].use_count() == unused; }));
  ASSERT_TRUE(WaitFor([&] { return client_->shards()->IsUp(1); }));

  // Items shard 1 stored without its confirmation getting out were sent
  // again elsewhere: the client deletes them there once it answers again
  // (docs/sharding.md). Then each item is stored once: none is lost.
  auto copies = [&] {
    std::vector<int> counts(3 * kItems);
    for (int s : {0, 1, 2}) {
      for (int32_t id : Ids(s)) {
        if (id < 3 * kItems) ++counts[id];
      }
    }
    return counts;
  };
  ASSERT_TRUE(WaitFor([&] {
    const std::vector<int> counts = copies();
    return std::all_of(counts.begin(), counts.end(),
                       [](int n) { return n == 1; });
  })) << "some items are lost or stored twice";
  const int64_t kept = tables_[1]->size();
  // Room for kAllowed more: taken by this insert, after any left queued.
  for (int i = 0; i < kAllowed; ++i) {
    ASSERT_TRUE(tables_[1]->Sample(kTimeout).ok());
  }
  ASSERT_TRUE(
      tables_[1]->InsertOrAssign(MakeInt32Item(1 << 30, 1, -1), kTimeout).ok());
  // Nothing it held queued got in: what it kept, and the probe.
  EXPECT_EQ(tables_[1]->size(), kept + 1);
  const std::vector<int> counts = copies();
  EXPECT_EQ(std::count(counts.begin(), counts.end(), 1), 3 * kItems);
}

TEST_F(ShardedWriterTest, TrajectoryWritersContinueWithoutAShardForGood) {
  constexpr int kItems = 300;
  std::thread chaos([&] {
    ASSERT_TRUE(WaitFor([&] { return tables_[1]->size() >= 100; }));
    Stop(1);
  });
  std::vector<absl::Status> statuses = RunWriters(6, [&](int w) {
    auto writer = client_->NewTrajectoryWriter(ChunksOfTwo());
    if (!writer.ok()) return writer.status();
    return WriteTrajectories(**writer, w * kItems, kItems);
  });
  chaos.join();
  for (const auto& status : statuses) EXPECT_TRUE(status.ok()) << status;
  // None lost (those shard 1 had confirmed are only there), none twice on
  // the shards that are up.
  EXPECT_EQ(Copies({0, 1, 2}, 6 * kItems).count(0), 0);
  const std::map<int, int> up = Copies({0, 2}, 6 * kItems);
  EXPECT_EQ(up.size() - up.count(0) - up.count(1), 0)
      << "ids by number of copies: " << ::testing::PrintToString(up);
  EXPECT_GT(up.at(1), 0);
}

TEST_F(ShardedWriterTest,
       ATrajectoryWriterFailsOnceNoShardAnswersForItsWindow) {
  auto writer = *client_->NewTrajectoryWriter(ChunksOfTwo());
  ASSERT_TRUE(WriteTrajectories(*writer, 0, 1).ok());
  for (int s = 0; s < kShards; ++s) Stop(s);
  auto refs = writer->Append({std::optional<TensorView>(Int32({1}, {}))});
  ASSERT_TRUE(refs.ok()) << refs.status();
  ASSERT_TRUE(writer->CreateItem(kTable, 1, {{{*(*refs)[0]}}}).ok());
  // After kConnectTimeout (not the 60 s of the flush).
  const absl::Status status = writer->Flush(0, kTimeout);
  EXPECT_TRUE(IsTransientError(status)) << status;
}

// What the parameterised tests run for each kind of writer: how many
// writers write how many items each, and when shard 1 is cut off (once it
// holds `cut_at` items) and restored (once the others have taken
// `restore_after` more).
struct WriterKind {
  std::string name;
  absl::StatusOr<std::unique_ptr<TestWriter>> (*make)(Client& client);
  int writers;
  int items;
  int64_t cut_at;
  int64_t restore_after;
};

absl::StatusOr<std::unique_ptr<TestWriter>> MakeTrajectoryWriter(
    Client& client) {
  REVERB_ASSIGN_OR_RETURN(auto writer,
                          client.NewTrajectoryWriter(ChunksOfTwo()));
  return std::make_unique<TrajectoryTestWriter>(std::move(writer));
}

absl::StatusOr<std::unique_ptr<TestWriter>> MakeLegacyWriter(Client& client) {
  REVERB_ASSIGN_OR_RETURN(auto writer, client.NewWriter(LegacyOptions()));
  return std::make_unique<LegacyTestWriter>(std::move(writer));
}

class ShardedWriterKindTest : public ShardedWriterTest,
                              public ::testing::WithParamInterface<WriterKind> {
 protected:
  std::unique_ptr<TestWriter> NewWriter() {
    auto writer = GetParam().make(*client_);
    EXPECT_TRUE(writer.ok()) << writer.status();
    return writer.ok() ? *std::move(writer) : nullptr;
  }

  // Runs the kind's writers (writer w: ids from w * items), calling `cut`
  // once shard 1 holds cut_at items and `restore` once the others have
  // taken restore_after more. The writers write the second half of their
  // items only after the cut (in-process writers could otherwise be done
  // before it). Every writer succeeds and, once the rejoin deletes have
  // run, every id is in exactly one table.
  void WriteThroughACut(const std::function<void()>& cut,
                        const std::function<void()>& restore) {
    const WriterKind& kind = GetParam();
    absl::Notification cut_done;
    std::thread chaos([&] {
      ASSERT_TRUE(WaitFor([&] { return tables_[1]->size() >= kind.cut_at; }));
      const int64_t before = ItemsElsewhere(1);
      cut();
      cut_done.Notify();
      ASSERT_TRUE(WaitFor(
          [&] { return ItemsElsewhere(1) >= before + kind.restore_after; }));
      restore();
    });
    const int half = kind.items / 2;
    std::vector<absl::Status> statuses =
        RunWriters(kind.writers, [&](int w) -> absl::Status {
          auto writer = kind.make(*client_);
          if (!writer.ok()) return writer.status();
          REVERB_RETURN_IF_ERROR((*writer)->Write(w * kind.items, half));
          if (!cut_done.WaitForNotificationWithTimeout(kTimeout)) {
            return absl::DeadlineExceededError("No cut.");
          }
          REVERB_RETURN_IF_ERROR(
              (*writer)->Write(w * kind.items + half, kind.items - half));
          return (*writer)->Close();
        });
    chaos.join();
    for (const auto& status : statuses) EXPECT_TRUE(status.ok()) << status;
    const int n = kind.writers * kind.items;
    const std::map<int, int> once = {{1, n}};
    EXPECT_TRUE(WaitFor([&] {
      return Copies({0, 1, 2}, n) == once;
    })) << "ids by number of copies: "
        << ::testing::PrintToString(Copies({0, 1, 2}, n));
  }
};

TEST_P(ShardedWriterKindTest, WritersFailOverAndTheStoppedShardRejoins) {
  WriteThroughACut([&] { Stop(1); }, [&] { Restart(1); });
}

// Shard 1 is reached through a proxy that freezes: it answers nothing,
// stores what reached it and confirms none of it. The refresher finds it
// down, the writers there cancel their streams and send their unconfirmed
// items elsewhere; once it thaws, what it stored of those is deleted there.
TEST_P(ShardedWriterKindTest, WritersLeaveAFrozenShardThatThenDeletes) {
  GrpcOnly grpc_only;
  FreezableProxy proxy(ports_[1]);
  client_ = *Client::Create(
      {Address(ports_[0]), Address(proxy.port()), Address(ports_[2])});
  WriteThroughACut([&] { proxy.Freeze(); }, [&] { proxy.Thaw(); });
}

// Shard 0 holds many more items than the others: of three writers (one on
// each shard), only the one on shard 0 moves at the end of an episode.
TEST_P(ShardedWriterKindTest, WritersOfAnOverloadedShardMoveAtAnEpisodeEnd) {
  OverloadShard0();
  std::vector<std::unique_ptr<TestWriter>> writers;
  std::set<int> first;
  for (int w = 0; w < 3; ++w) {
    writers.push_back(NewWriter());
    ASSERT_NE(writers[w], nullptr);
    ASSERT_TRUE(writers[w]->Write(10 * w, 1).ok());
    first.insert(Where(10 * w));
  }
  ASSERT_EQ(first, (std::set<int>{0, 1, 2}));
  for (int w = 0; w < 3; ++w) {
    const int shard = Where(10 * w);
    ASSERT_TRUE(writers[w]->EndEpisode().ok());
    ASSERT_TRUE(writers[w]->Write(10 * w + 1, 1).ok());
    if (shard == 0) {
      EXPECT_NE(Where(10 * w + 1), 0) << "writer " << w;
    } else {
      EXPECT_EQ(Where(10 * w + 1), shard) << "writer " << w;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Writers, ShardedWriterKindTest,
    ::testing::Values(WriterKind{"Trajectory", MakeTrajectoryWriter, 6, 600,
                                 100, 500},
                      WriterKind{"Legacy", MakeLegacyWriter, 3, 300, 50, 200}),
    [](const ::testing::TestParamInfo<WriterKind>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace deepmind::reverb
