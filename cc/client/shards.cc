#include "cc/client/shards.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cc/client/ask_server_info.h"
#include "cc/support/thread_name.h"
#include "grpcpp/client_context.h"

namespace deepmind::reverb {
namespace {

bool HasGlobalMeaning(int selector) {
  return selector == KeyDistributionOptions::kUniform ||
         selector == KeyDistributionOptions::kPrioritized;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Shards>> Shards::Create(
    std::vector<std::string> addresses, absl::Duration keepalive) {
  if (addresses.empty()) {
    return absl::InvalidArgumentError("At least one server address is needed.");
  }
  std::vector<std::shared_ptr<const Connection>> connections;
  absl::flat_hash_set<std::string> seen;
  for (auto& address : addresses) {
    if (address.empty()) {
      return absl::InvalidArgumentError("Server addresses must not be empty.");
    }
    if (!seen.insert(address).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Server address ", address, " is given twice."));
    }
    connections.push_back(
        std::make_shared<Connection>(std::move(address), keepalive));
  }
  std::shared_ptr<Shards> shards(new Shards(std::move(connections)));
  if (shards->size() > 1) {
    shards->refresher_ =
        std::thread([raw = shards.get()] { raw->RunRefresher(); });
    SetThreadName(shards->refresher_, "reverb-shards");
  }
  return shards;
}

Shards::Shards(std::vector<std::shared_ptr<const Connection>> connections)
    : connections_(std::move(connections)), shards_(connections_.size()) {}

Shards::~Shards() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (refresher_.joinable()) refresher_.join();
}

void Shards::RunRefresher() {
  while (true) {
    RefreshAll();
    MutexLock lock(&mu_);
    ++refreshes_;
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kRefreshInterval);
    if (stopping_) return;
  }
}

void Shards::RefreshAll() {
  std::vector<absl::StatusOr<ServerInfoResponse>> infos =
      AskServerInfo(connections_, [this](int s, grpc::ClientContext* context) {
        if (!IsUp(s)) connections_[s]->ResetConnectBackoff();
        context->set_deadline(
            absl::ToChronoTime(absl::Now() + kRefreshTimeout));
      });
  std::vector<int> down;
  std::vector<
      std::pair<int, absl::flat_hash_map<std::string, std::vector<uint64_t>>>>
      deletes;
  for (int s = 0; s < size(); ++s) {
    MutexLock lock(&mu_);
    ShardState& shard = shards_[s];
    if (!infos[s].ok()) {
      if (MarkDownLocked(s)) down.push_back(s);
      continue;
    }
    if (!shard.up) ++shard.epoch;
    shard.up = true;
    shard.tables.clear();
    for (const TableInfo& table : infos[s]->table_info()) {
      TableState& state = shard.tables[table.name()];
      state.size = table.current_size();
      state.priority_mass = table.priority_mass();
      state.can_sample = !table.samples_blocked();
      state.selector = table.sampler_options().distribution_case();
    }
    if (!shard.deletes.empty()) {
      deletes.emplace_back(s, std::move(shard.deletes));
      shard.deletes.clear();
    }
  }
  for (int s : down) NotifyDown(s);
  for (auto& [s, tables] : deletes) {
    for (auto& [table, keys] : tables) {
      MutatePrioritiesRequest request;
      request.set_table(table);
      request.mutable_delete_keys()->Add(keys.begin(), keys.end());
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + kRefreshTimeout));
      MutatePrioritiesResponse response;
      if (!connections_[s]
               ->stub()
               ->MutatePriorities(&context, request, &response)
               .ok()) {
        // Tried again at the next refresh that reaches the shard.
        DeleteOnRejoin(s, table, std::move(keys));
      }
    }
  }
}

bool Shards::MarkDownLocked(int shard) {
  if (!shards_[shard].up) return false;
  shards_[shard].up = false;
  return true;
}

void Shards::NotifyDown(int shard) {
  MutexLock lock(&watch_mu_);
  for (const auto& [id, watcher] : watchers_) {
    if (watcher.shard == shard) watcher.on_down();
  }
}

void Shards::MarkDown(int shard, std::optional<int64_t> epoch) {
  bool went_down;
  {
    MutexLock lock(&mu_);
    if (epoch.has_value() && *epoch != shards_[shard].epoch) return;
    went_down = MarkDownLocked(shard);
  }
  if (went_down) NotifyDown(shard);
}

bool Shards::IsUp(int shard) const {
  MutexLock lock(&mu_);
  return shards_[shard].up;
}

int64_t Shards::Epoch(int shard) const {
  MutexLock lock(&mu_);
  return shards_[shard].epoch;
}

Shards::Weights Shards::GetWeights(const std::string& table) {
  Weights weights;
  weights.weight.assign(size(), 0);
  if (size() == 1) {
    weights.weight[0] = 1;
    weights.total = 1;
    weights.found = true;
    return weights;
  }
  MutexLock lock(&mu_);
  auto refreshed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return refreshes_ > 0 || stopping_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&refreshed), 2 * kRefreshTimeout);
  double mass = 0;
  for (const ShardState& shard : shards_) {
    auto it = shard.tables.find(table);
    if (!shard.up || it == shard.tables.end()) continue;
    const TableState& state = it->second;
    weights.found = true;
    weights.total_size += state.size;
    if (!HasGlobalMeaning(state.selector)) weights.round_robin = true;
    if (state.selector == KeyDistributionOptions::kPrioritized &&
        state.can_sample) {
      mass += state.priority_mass;
    }
  }
  // Without mass (all priorities 0, or dm-reverb shards, which report
  // none) a Prioritized table samples uniformly, and so do its shards.
  const bool by_mass = mass > 0;
  for (int s = 0; s < size(); ++s) {
    const ShardState& shard = shards_[s];
    auto it = shard.tables.find(table);
    if (!shard.up || it == shard.tables.end() || !it->second.can_sample) {
      continue;
    }
    const TableState& state = it->second;
    weights.weight[s] = weights.round_robin ? 1
                        : by_mass           ? state.priority_mass
                                            : static_cast<double>(state.size);
    weights.total += weights.weight[s];
  }
  return weights;
}

int64_t Shards::Watch(int shard, std::function<void()> on_down) {
  MutexLock lock(&watch_mu_);
  const int64_t id = next_watcher_++;
  watchers_.emplace(id, Watcher{shard, std::move(on_down)});
  return id;
}

void Shards::Unwatch(int64_t id) {
  MutexLock lock(&watch_mu_);
  watchers_.erase(id);
}

int64_t Shards::NumItems(int shard) const {
  MutexLock lock(&mu_);
  return NumItemsLocked(shard);
}

int64_t Shards::NumItemsLocked(int shard) const {
  int64_t items = 0;
  for (const auto& [name, table] : shards_[shard].tables) items += table.size;
  return items;
}

int Shards::AcquireWriterShard(int avoid) {
  MutexLock lock(&mu_);
  int best = -1;
  for (int s = 0; s < size(); ++s) {
    if (!shards_[s].up || (s == avoid && size() > 1)) continue;
    if (best == -1 || shards_[s].writers < shards_[best].writers ||
        (shards_[s].writers == shards_[best].writers &&
         NumItemsLocked(s) < NumItemsLocked(best))) {
      best = s;
    }
  }
  if (best == -1) best = avoid >= 0 && size() > 1 ? (avoid + 1) % size() : 0;
  ++shards_[best].writers;
  return best;
}

void Shards::ReleaseWriterShard(int shard) {
  MutexLock lock(&mu_);
  --shards_[shard].writers;
}

int Shards::RebalanceWriterShard(int shard) {
  MutexLock lock(&mu_);
  int least = -1;
  for (int s = 0; s < size(); ++s) {
    if (shards_[s].up &&
        (least == -1 || NumItemsLocked(s) < NumItemsLocked(least))) {
      least = s;
    }
  }
  if (least == -1 || least == shard) return shard;
  const int64_t items = NumItemsLocked(shard);
  const int64_t fewest = NumItemsLocked(least);
  if (items <= kRebalanceRatio * fewest ||
      items - fewest < kRebalanceMinItems) {
    return shard;
  }
  --shards_[shard].writers;
  ++shards_[least].writers;
  return least;
}

void Shards::DeleteOnRejoin(int shard, const std::string& table,
                            std::vector<uint64_t> keys) {
  if (keys.empty()) return;
  MutexLock lock(&mu_);
  auto& pending = shards_[shard].deletes[table];
  pending.insert(pending.end(), keys.begin(), keys.end());
}

}  // namespace deepmind::reverb
