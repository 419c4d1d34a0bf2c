// Shards: the servers one Client spreads its writers and samples over, and
// what the client knows of each (docs/sharding.md).
//
// Each shard has a Connection. With one shard nothing else happens: no
// thread, no extra calls, the wire traffic of a single-server client.
// With several, a background thread ("reverb-shards") asks every shard for
// its ServerInfo each kRefreshInterval (each call bounded by
// kRefreshTimeout), from Create() on, and learns:
//
// - Reachability. A shard that fails a refresh, or that a writer or
//   sampler reports with MarkDown(), is down: writers and samplers skip it
//   and the streams watching it (Watch) are cancelled. The refresher keeps
//   trying it and it is up again once it answers. Each return starts a new
//   epoch of the shard: a failure that a writer or sampler reports of a
//   stream begun in an earlier epoch is of the server that was there then,
//   and leaves the one now answering up.
// - Table state per shard: size, priority mass and whether its rate limiter
//   lets a sample through (TableInfo's extension fields; a dm-reverb server
//   reports no mass, so a Prioritized table on it weighs by its size).
//   Weights() turns them into the draw a sampler makes: by size (Uniform),
//   by priority mass (Prioritized), so that every item has the probability
//   one server holding all of them would give it; round-robin for the
//   selectors without a global meaning (Fifo, Lifo, heaps).
// - Writer placement: AcquireWriterShard() picks the up shard with the
//   fewest writers, then the fewest items; at an episode boundary
//   RebalanceWriterShard() moves a writer off a shard that holds many more
//   items than the least loaded one.
// - Where sampled keys came from (sampled_keys(), recorded by the
//   samplers), for the Client to route priority updates and deletes.
// - Keys to delete on rejoin: a writer that sent items again elsewhere
//   after its shard went down hands their keys to DeleteOnRejoin(); once
//   that shard answers again they are deleted there, so that an item the
//   shard had stored without confirming it is not stored twice.
//
// Thread-safe.
#ifndef REVERB_CC_CLIENT_SHARDS_H_
#define REVERB_CC_CLIENT_SHARDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/connection.h"
#include "cc/client/sampled_keys.h"
#include "cc/support/export.h"
#include "cc/support/keepalive.h"
#include "cc/support/mutex.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT Shards {
 public:
  static constexpr absl::Duration kRefreshInterval = absl::Milliseconds(100);
  static constexpr absl::Duration kRefreshTimeout = absl::Seconds(1);

  // INVALID_ARGUMENT for no address, an empty one or one given twice.
  // `keepalive`: each Connection's (connection.h).
  static absl::StatusOr<std::shared_ptr<Shards>> Create(
      std::vector<std::string> addresses,
      absl::Duration keepalive = KeepaliveFromEnvironment());

  ~Shards();

  int size() const { return static_cast<int>(connections_.size()); }
  const std::shared_ptr<const Connection>& connection(int shard) const {
    return connections_[shard];
  }
  const std::vector<std::shared_ptr<const Connection>>& connections() const {
    return connections_;
  }
  const std::string& address(int shard) const {
    return connections_[shard]->server_address();
  }

  // How a sampler draws the shard of each sample of a table.
  struct Weights {
    // Draw shard s with probability weight[s] / total; or, if round_robin,
    // take the shards with a positive weight in turn.
    bool round_robin = false;
    std::vector<double> weight;
    double total = 0;
    // The table's size summed over the shards that are up.
    int64_t total_size = 0;
    // Some shard that is up has the table.
    bool found = false;
  };
  // The latest weights of `table` (all zero while no shard that is up has
  // items its rate limiter lets out). The first call waits for a refresh
  // (at most kRefreshTimeout).
  Weights GetWeights(const std::string& table) ABSL_LOCKS_EXCLUDED(mu_);

  bool IsUp(int shard) const ABSL_LOCKS_EXCLUDED(mu_);
  // How many times `shard` has come up again after being down: what a
  // writer or sampler notes as it begins a stream there, for MarkDown.
  int64_t Epoch(int shard) const ABSL_LOCKS_EXCLUDED(mu_);
  // A call to `shard` failed with UNAVAILABLE (or timed out): it is down
  // until a refresh reaches it. With `epoch` (the Epoch() at which the
  // failed call or stream began), nothing happens if the shard has come up
  // again since.
  void MarkDown(int shard, std::optional<int64_t> epoch = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `on_down` each time `shard` goes down, from the thread that finds
  // it down, until the returned id is passed to Unwatch(), which waits for
  // a call in progress. `on_down` must not call Watch or Unwatch (cancelling
  // a call is what it is for).
  int64_t Watch(int shard, std::function<void()> on_down)
      ABSL_LOCKS_EXCLUDED(watch_mu_);
  void Unwatch(int64_t id) ABSL_LOCKS_EXCLUDED(watch_mu_);

  // A shard for a new writer, other than `avoid` if another is up (-1: no
  // preference): the up shard with the fewest writers, then the fewest
  // items; shard 0 when none is known to be up. Counted until
  // ReleaseWriterShard.
  int AcquireWriterShard(int avoid = -1) ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseWriterShard(int shard) ABSL_LOCKS_EXCLUDED(mu_);
  // For a writer of `shard` at an episode boundary: the up shard with the
  // fewest items if `shard` holds more than kRebalanceRatio times as many
  // and at least kRebalanceMinItems more (the writer is then counted there
  // instead); else `shard`.
  static constexpr double kRebalanceRatio = 1.25;
  static constexpr int64_t kRebalanceMinItems = 1000;
  int RebalanceWriterShard(int shard) ABSL_LOCKS_EXCLUDED(mu_);
  // Items in all tables of `shard` at the latest refresh.
  int64_t NumItems(int shard) const ABSL_LOCKS_EXCLUDED(mu_);

  SampledKeys& sampled_keys() { return sampled_keys_; }

  // Deletes `keys` from `table` on `shard` once it answers a refresh.
  void DeleteOnRejoin(int shard, const std::string& table,
                      std::vector<uint64_t> keys) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit Shards(std::vector<std::shared_ptr<const Connection>> connections);

  struct TableState {
    int64_t size = 0;
    double priority_mass = 0;
    bool can_sample = false;
    // KeyDistributionOptions::distribution_case() of the sampler.
    int selector = 0;
  };
  struct ShardState {
    bool up = true;
    // See Epoch().
    int64_t epoch = 0;
    absl::flat_hash_map<std::string, TableState> tables;
    int writers = 0;
    // Table -> keys to delete there once the shard answers.
    absl::flat_hash_map<std::string, std::vector<uint64_t>> deletes;
  };

  void RunRefresher();
  // One ServerInfo call to every shard (in parallel), then the rejoin
  // deletes of the shards that answered.
  void RefreshAll() ABSL_LOCKS_EXCLUDED(mu_);
  // Items in all tables of `shard` at the latest refresh.
  int64_t NumItemsLocked(int shard) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `shard` down; true if it was up.
  bool MarkDownLocked(int shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls the watchers of `shard`.
  void NotifyDown(int shard) ABSL_LOCKS_EXCLUDED(mu_, watch_mu_);

  const std::vector<std::shared_ptr<const Connection>> connections_;
  SampledKeys sampled_keys_;

  mutable Mutex mu_;
  std::vector<ShardState> shards_ ABSL_GUARDED_BY(mu_);
  // Held while watchers are called (never with mu_).
  Mutex watch_mu_;
  struct Watcher {
    int shard;
    std::function<void()> on_down;
  };
  absl::flat_hash_map<int64_t, Watcher> watchers_ ABSL_GUARDED_BY(watch_mu_);
  int64_t next_watcher_ ABSL_GUARDED_BY(watch_mu_) = 0;
  int64_t refreshes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread refresher_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_SHARDS_H_
