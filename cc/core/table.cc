#include "cc/core/table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cc/core/errors.h"
#include "cc/selectors/from_options.h"
#include "cc/support/mutex.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {
namespace {

// The worker releases the table lock after this many rounds so that info(),
// MutateItems() and new requests are never held up for long.
constexpr int kMaxRoundsPerLock = 256;

// How many keys ahead MutateItems prefetches their entries.
constexpr size_t kMutatePrefetch = 8;

// How many picks a batch draws ahead of their use when the table does not
// change while sampling (see SampleBatchLocked).
constexpr size_t kSampleLookahead = 8;

int64_t ChunkBytes(const TableItem& item) {
  int64_t bytes = 0;
  for (const auto& chunk : item.chunks) bytes += chunk->DataByteSizeLong();
  return bytes;
}

void RunOutbox(std::vector<std::function<void()>>* callbacks) {
  for (auto& callback : *callbacks) callback();
  callbacks->clear();
}

template <typename Request>
bool IsCancelled(const Request& request) {
  return request.cancellation != nullptr && request.cancellation->load();
}

absl::Status InsertCancelled() {
  return absl::CancelledError("The insert was cancelled.");
}

// Hands the cancelled requests of `*queue` to `finish` and keeps the others,
// in order.
template <typename Request, typename Finish>
void DropCancelledRequests(std::deque<Request>* queue, Finish finish) {
  if (std::none_of(queue->begin(), queue->end(), IsCancelled<Request>)) return;
  std::deque<Request> kept;
  for (Request& request : *queue) {
    if (IsCancelled(request)) {
      finish(&request);
    } else {
      kept.push_back(std::move(request));
    }
  }
  *queue = std::move(kept);
}

}  // namespace

absl::StatusOr<std::shared_ptr<Table>> Table::Create(
    std::string name, std::unique_ptr<ItemSelector> sampler,
    std::unique_ptr<ItemSelector> remover, int64_t max_size,
    int32_t max_times_sampled, RateLimiter rate_limiter,
    std::optional<tensorflow::StructuredValue> signature) {
  if (name.empty()) {
    return absl::InvalidArgumentError("name must be nonempty");
  }
  if (max_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_size (", max_size, ") must be a positive integer"));
  }
  if (sampler == nullptr || remover == nullptr) {
    return absl::InvalidArgumentError("A table needs a sampler and a remover.");
  }
  return std::shared_ptr<Table>(new Table(
      std::move(name), std::move(sampler), std::move(remover), max_size,
      max_times_sampled, std::move(rate_limiter), std::move(signature)));
}

Table::Table(std::string name, std::unique_ptr<ItemSelector> sampler,
             std::unique_ptr<ItemSelector> remover, int64_t max_size,
             int32_t max_times_sampled, RateLimiter rate_limiter,
             std::optional<tensorflow::StructuredValue> signature)
    : name_(std::move(name)),
      max_size_(max_size),
      max_times_sampled_(max_times_sampled),
      signature_(std::move(signature)),
      sampler_(std::move(sampler)),
      remover_(std::move(remover)),
      rate_limiter_(std::move(rate_limiter)) {
  worker_ = std::thread([this] { WorkerLoop(); });
  SetThreadName(worker_, "reverb-table");
}

Table::~Table() { Close(); }

void Table::Close() {
  MutexLock close_lock(&close_mu_);
  {
    MutexLock lock(&queue_mu_);
    closed_ = true;
    queue_cv_.Signal();
  }
  if (worker_.joinable()) worker_.join();
}

bool Table::closed() const {
  MutexLock lock(&queue_mu_);
  return closed_;
}

bool Table::samples_waiting() const {
  MutexLock lock(&queue_mu_);
  return samples_waiting_ || !incoming_samples_.empty();
}

void Table::Wake() {
  MutexLock lock(&queue_mu_);
  wake_ = true;
  queue_cv_.Signal();
}

void Table::InsertOrAssignAsync(TableItem item, InsertCallback done,
                                Cancellation cancellation) {
  absl::Status status = ValidateTableItem(item);
  if (status.ok() && std::isnan(item.item.priority())) {
    status = absl::InvalidArgumentError(
        absl::StrCat("Priority of item ", item.item.key(), " is NaN."));
  }
  if (!status.ok()) {
    done(status);
    return;
  }
  InsertRequest request{std::move(item), std::move(done),
                        std::move(cancellation)};
  Outbox outbox;
  {
    MutexLock lock(&queue_mu_);
    if (closed_) {
      status = TableClosed();
    } else if (!incoming_inserts_.empty() || worker_inserts_.load() > 0 ||
               !TryInsertNow(&request, &status, &outbox)) {
      incoming_inserts_.push_back(std::move(request));
      queue_cv_.Signal();
      return;
    } else if (samples_waiting_) {
      wake_ = true;  // Waiting samples may proceed now.
      queue_cv_.Signal();
    }
  }
  outbox.garbage.clear();
  request.done(status);
}

bool Table::TryInsertNow(InsertRequest* request, absl::Status* status,
                         Outbox* outbox) {
  MutexLock lock(&mu_);
  if (IsCancelled(*request)) {
    *status = InsertCancelled();
    return true;
  }
  if (!rate_limiter_.CanInsert(1)) {
    request->blocked = true;
    inserts_blocked_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *status = InsertOrAssignLocked(std::move(request->item), outbox);
  return true;
}

absl::Status Table::InsertOrAssign(TableItem item, absl::Duration timeout) {
  struct State {
    Notification notification;
    absl::Status status;
  };
  auto state = std::make_shared<State>();
  InsertOrAssignAsync(std::move(item), [state](const absl::Status& status) {
    state->status = status;
    state->notification.Notify();
  });
  if (!state->notification.WaitForNotificationWithTimeout(timeout)) {
    return RateLimiterTimeout();
  }
  return state->status;
}

void Table::SampleAsync(int32_t batch_size, absl::Time deadline,
                        SampleCallback done, Cancellation cancellation,
                        int64_t max_bytes) {
  if (batch_size < 1) {
    done(absl::InvalidArgumentError(
        absl::StrCat("batch_size (", batch_size, ") must be >= 1.")));
    return;
  }
  {
    MutexLock lock(&queue_mu_);
    if (!closed_) {
      SampleRequest request{batch_size, deadline, std::move(done),
                            std::move(cancellation), max_bytes};
      request.items.reserve(std::min(batch_size, 1024));
      incoming_samples_.push_back(std::move(request));
      queue_cv_.Signal();
      return;
    }
  }
  done(TableClosed());
}

void Table::Cancel(const Cancellation& cancellation) {
  {
    // Under mu_: no request made with it changes the table from here on.
    MutexLock lock(&mu_);
    cancellation->store(true);
    ++cancels_;
  }
  Wake();
}

absl::StatusOr<std::vector<SampledItem>> Table::SampleFlexibleBatch(
    int32_t batch_size, absl::Duration timeout) {
  struct State {
    Notification notification;
    absl::StatusOr<std::vector<SampledItem>> result;
  };
  auto state = std::make_shared<State>();
  SampleAsync(batch_size, absl::Now() + timeout,
              [state](absl::StatusOr<std::vector<SampledItem>> items) {
                state->result = std::move(items);
                state->notification.Notify();
              });
  // The worker answers every request by its deadline, so this wait ends.
  state->notification.WaitForNotification();
  return std::move(state->result);
}

absl::StatusOr<SampledItem> Table::Sample(absl::Duration timeout) {
  REVERB_ASSIGN_OR_RETURN(std::vector<SampledItem> items,
                          SampleFlexibleBatch(1, timeout));
  return std::move(items.front());
}

absl::Status Table::MutateItems(absl::Span<const uint64_t> keys,
                                absl::Span<const double> priorities,
                                absl::Span<const uint64_t> deletes) {
  if (keys.size() != priorities.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MutateItems got ", keys.size(), " keys and ",
                     priorities.size(), " priorities."));
  }
  Outbox outbox;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    for (uint64_t key : deletes) DeleteLocked(key, &outbox);
    // The keys the table holds, found with the lookups of the keys
    // kMutatePrefetch ahead started (prefetched): in a large table each
    // lookup misses the cache.
    std::vector<Entry*> entries;
    std::vector<uint64_t> found_keys;
    std::vector<double> found_priorities;
    entries.reserve(keys.size());
    found_keys.reserve(keys.size());
    found_priorities.reserve(keys.size());
    for (size_t i = 0; i < std::min(keys.size(), kMutatePrefetch); ++i) {
      entries_.prefetch(keys[i]);
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i + kMutatePrefetch < keys.size()) {
        entries_.prefetch(keys[i + kMutatePrefetch]);
      }
      auto it = entries_.find(keys[i]);
      if (it == entries_.end()) continue;
      entries.push_back(&it->second);
      found_keys.push_back(keys[i]);
      found_priorities.push_back(priorities[i]);
    }
    if (remover_->uses_priorities()) {
      for (size_t i = 0; i < entries.size(); ++i) {
        absl::Status update_status = UpdatePriorityLocked(
            found_keys[i], entries[i], found_priorities[i]);
        if (status.ok()) status = update_status;
      }
    } else {
      // Only the sampler has anything to do: all keys at once.
      std::vector<absl::Status> statuses(entries.size());
      if (sampler_->uses_priorities()) {
        sampler_->UpdateMany(found_keys, found_priorities,
                             absl::MakeSpan(statuses));
      }
      for (size_t i = 0; i < entries.size(); ++i) {
        if (statuses[i].ok()) {
          entries[i]->priority = found_priorities[i];
        } else if (status.ok()) {
          status = statuses[i];
        }
      }
    }
  }
  outbox.garbage.clear();
  if (!deletes.empty()) Wake();
  return status;
}

absl::Status Table::MutateItems(absl::Span<const KeyWithPriority> updates,
                                absl::Span<const uint64_t> deletes) {
  const PriorityArrays arrays = PriorityArrays::From(updates);
  return MutateItems(arrays.keys, arrays.priorities, deletes);
}

void Table::ClearLocked(Outbox* outbox) {
  for (auto& [key, entry] : entries_) {
    outbox->garbage.push_back(std::move(entry.item));
  }
  entries_.clear();
  sampler_->Clear();
  remover_->Clear();
  episode_refs_.clear();
  chunk_census_.Clear();
  num_deleted_episodes_ = 0;
  num_unique_samples_ = 0;
  rate_limiter_.Reset();
}

void Table::Reset() {
  Outbox outbox;
  {
    MutexLock lock(&mu_);
    ClearLocked(&outbox);
  }
  outbox.garbage.clear();
  Wake();
}

Table::CheckpointData Table::Checkpoint() const {
  CheckpointData data;
  MutexLock lock(&mu_);
  PriorityTableCheckpoint& table = data.table;
  table.set_table_name(name_);
  table.set_max_size(max_size_);
  table.set_max_times_sampled(max_times_sampled_);
  *table.mutable_rate_limiter() = rate_limiter_.CheckpointState();
  *table.mutable_sampler() = sampler_->options();
  *table.mutable_remover() = remover_->options();
  table.set_num_deleted_episodes(num_deleted_episodes_);
  table.set_num_unique_samples(num_unique_samples_);
  if (signature_.has_value()) *table.mutable_signature() = *signature_;
  std::vector<const Entry*> entries;
  entries.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
  absl::flat_hash_set<const Chunk*> seen;
  data.items.reserve(entries.size());
  for (const Entry* entry : entries) {
    PrioritizedItem& item = data.items.emplace_back(entry->item->item);
    item.set_table(name_);
    item.set_priority(entry->priority);
    item.set_times_sampled(entry->times_sampled);
    for (const auto& chunk : entry->item->chunks) {
      if (seen.insert(chunk.get()).second) data.chunks.push_back(chunk);
    }
  }
  return data;
}

absl::Status Table::Restore(const PriorityTableCheckpoint& checkpoint,
                            std::vector<TableItem> items,
                            bool use_checkpoint_options) {
  for (const TableItem& item : items) {
    REVERB_RETURN_IF_ERROR(ValidateTableItem(item));
  }
  std::unique_ptr<ItemSelector> sampler, remover;
  RateLimiterCheckpoint limiter = checkpoint.rate_limiter();
  if (use_checkpoint_options) {
    REVERB_ASSIGN_OR_RETURN(sampler, MakeSelector(checkpoint.sampler()));
    REVERB_ASSIGN_OR_RETURN(remover, MakeSelector(checkpoint.remover()));
    if (checkpoint.max_size() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Checkpointed max_size of table ", name_, " is ",
                       checkpoint.max_size(), "."));
    }
  }
  Outbox outbox;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    if (!use_checkpoint_options) {
      // This table's settings with the checkpoint's counters.
      RateLimiterCheckpoint own = rate_limiter_.CheckpointState();
      own.set_sample_count(limiter.sample_count());
      own.set_insert_count(limiter.insert_count());
      own.set_delete_count(limiter.delete_count());
      limiter = own;
    }
    REVERB_ASSIGN_OR_RETURN(RateLimiter rate_limiter,
                            RateLimiter::FromCheckpoint(limiter));
    ClearLocked(&outbox);
    if (use_checkpoint_options) {
      sampler_ = std::move(sampler);
      remover_ = std::move(remover);
      max_size_ = checkpoint.max_size();
      max_times_sampled_ = checkpoint.max_times_sampled();
      signature_.reset();
      if (checkpoint.has_signature()) signature_ = checkpoint.signature();
    }
    rate_limiter_ = std::move(rate_limiter);
    for (TableItem& item : items) {
      const int32_t times_sampled = item.item.times_sampled();
      status = AddItemLocked(std::move(item), times_sampled, &outbox);
      if (!status.ok()) break;
    }
    if (status.ok()) {
      num_deleted_episodes_ += checkpoint.num_deleted_episodes();
      num_unique_samples_ = checkpoint.num_unique_samples();
    } else {
      ClearLocked(&outbox);
    }
  }
  outbox.garbage.clear();
  Wake();
  return status;
}

bool Table::CanSample(int64_t num_samples) const {
  MutexLock lock(&mu_);
  return rate_limiter_.CanSample(num_samples);
}

bool Table::CanInsert(int64_t num_inserts) const {
  MutexLock lock(&mu_);
  return rate_limiter_.CanInsert(num_inserts);
}

int64_t Table::max_size() const {
  MutexLock lock(&mu_);
  return max_size_;
}

int64_t Table::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

absl::StatusOr<PrioritizedItem> Table::Get(uint64_t key) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Key ", key, " not found in table ", name_, "."));
  }
  PrioritizedItem item = it->second.item->item;
  item.set_priority(it->second.priority);
  item.set_times_sampled(it->second.times_sampled);
  return item;
}

TableStats Table::stats() const {
  TableStats stats;
  stats.name = name_;
  stats.inserts_blocked = inserts_blocked_.load(std::memory_order_relaxed);
  stats.samples_blocked = samples_blocked_.load(std::memory_order_relaxed);
  MutexLock lock(&mu_);
  stats.size = static_cast<int64_t>(entries_.size());
  stats.max_size = max_size_;
  stats.inserts = rate_limiter_.inserts();
  stats.samples = rate_limiter_.samples();
  stats.deletes = rate_limiter_.deletes();
  stats.chunks = chunk_census_.chunks();
  stats.chunk_bytes = chunk_census_.bytes();
  stats.chunk_references = chunk_census_.references();
  stats.insert_blocked_time = worker_time_[kWaitingForSamples];
  stats.sample_blocked_time = worker_time_[kWaitingForInserts];
  stats.samples_per_insert = rate_limiter_.samples_per_insert();
  stats.cursor = rate_limiter_.cursor();
  stats.min_diff = rate_limiter_.min_diff();
  stats.max_diff = rate_limiter_.max_diff();
  return stats;
}

TableInfo Table::info() const {
  TableInfo info;
  info.set_name(name_);
  MutexLock lock(&mu_);
  info.set_max_size(max_size_);
  info.set_max_times_sampled(max_times_sampled_);
  if (signature_.has_value()) *info.mutable_signature() = *signature_;
  *info.mutable_sampler_options() = sampler_->options();
  *info.mutable_remover_options() = remover_->options();
  *info.mutable_rate_limiter_info() = rate_limiter_.Info();
  info.set_current_size(entries_.size());
  info.set_num_episodes(episode_refs_.size());
  info.set_num_deleted_episodes(num_deleted_episodes_);
  info.set_num_unique_samples(num_unique_samples_);
  info.set_priority_mass(sampler_->weight_sum());
  info.set_samples_blocked(!rate_limiter_.CanSample(1));
  info.set_num_local_inserts(local_inserts_);
  info.set_num_local_samples(local_samples_);
  auto ms = [&](WorkerState state) {
    return absl::ToInt64Milliseconds(worker_time_[state]);
  };
  TableWorkerTime* time = info.mutable_table_worker_time();
  time->set_running_ms(ms(kRunning));
  time->set_sampling_ms(ms(kSampling));
  time->set_inserting_ms(ms(kInserting));
  time->set_sleeping_ms(ms(kSleeping));
  time->set_waiting_for_sampling_ms(ms(kWaitingForSamples));
  time->set_waiting_for_inserts_ms(ms(kWaitingForInserts));
  return info;
}

std::string Table::DebugString() const {
  MutexLock lock(&mu_);
  // dm-reverb's order and words.
  return absl::StrCat(
      "Table(sampler=", sampler_->DebugString(),
      ", remover=", remover_->DebugString(), ", max_size=", max_size_,
      ", max_times_sampled=", max_times_sampled_, ", name=", name_,
      ", rate_limiter=", rate_limiter_.DebugString(), ", signature=",
      signature_.has_value() ? signature_->DebugString() : "nullptr", ")");
}

// ---------------------------------------------------------------------------
// Item changes (under mu_).

absl::Status Table::UpdatePriorityLocked(uint64_t key, Entry* entry,
                                         double priority) {
  // `key` is in both selectors (as in entries_): one that ignores
  // priorities has nothing to do.
  if (sampler_->uses_priorities()) {
    REVERB_RETURN_IF_ERROR(sampler_->Update(key, priority));
  }
  if (remover_->uses_priorities()) {
    if (absl::Status status = remover_->Update(key, priority); !status.ok()) {
      // Keep the selectors in agreement: undo the sampler's update.
      if (sampler_->uses_priorities()) {
        sampler_->Update(key, entry->priority).IgnoreError();
      }
      return status;
    }
  }
  entry->priority = priority;
  return absl::OkStatus();
}

absl::Status Table::InsertOrAssignLocked(TableItem item, Outbox* outbox) {
  const uint64_t key = item.item.key();
  const double priority = item.item.priority();
  if (auto it = entries_.find(key); it != entries_.end()) {
    outbox->garbage.push_back(std::make_shared<TableItem>(std::move(item)));
    return UpdatePriorityLocked(key, &it->second, priority);
  }
  const absl::Time now = absl::Now();
  auto* inserted_at = item.item.mutable_inserted_at();
  inserted_at->set_seconds(absl::ToUnixSeconds(now));
  inserted_at->set_nanos((now - absl::FromUnixSeconds(inserted_at->seconds())) /
                         absl::Nanoseconds(1));
  REVERB_RETURN_IF_ERROR(AddItemLocked(std::move(item), 0, outbox));
  rate_limiter_.Insert();
  return absl::OkStatus();
}

absl::Status Table::AddItemLocked(TableItem item, int32_t times_sampled,
                                  Outbox* outbox) {
  const uint64_t key = item.item.key();
  const double priority = item.item.priority();
  if (entries_.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Item ", key, " appears twice in table ", name_, "."));
  }
  REVERB_RETURN_IF_ERROR(sampler_->Insert(key, priority));
  if (absl::Status status = remover_->Insert(key, priority); !status.ok()) {
    sampler_->Delete(key).IgnoreError();
    return status;
  }
  item.item.set_times_sampled(0);
  for (const auto& chunk : item.chunks) ++episode_refs_[chunk->episode_id()];
  chunk_census_.Add(item);
  const int64_t chunk_bytes = ChunkBytes(item);
  // The item never changes from here on: serialized once, for every sample.
  item.encoded_item = item.item.SerializeAsString();
  auto stored = std::make_shared<const TableItem>(std::move(item));
  entries_.emplace(key, Entry{std::move(stored), priority, times_sampled,
                              chunk_bytes, next_seq_++});
  while (static_cast<int64_t>(entries_.size()) > max_size_) {
    DeleteLocked(remover_->Sample().key, outbox);
  }
  return absl::OkStatus();
}

void Table::DeleteLocked(uint64_t key, Outbox* outbox) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  for (const auto& chunk : it->second.item->chunks) {
    auto episode = episode_refs_.find(chunk->episode_id());
    if (--episode->second == 0) {
      episode_refs_.erase(episode);
      ++num_deleted_episodes_;
    }
  }
  chunk_census_.Remove(*it->second.item);
  // The selectors hold every key of entries_, so these cannot fail.
  sampler_->Delete(key).IgnoreError();
  remover_->Delete(key).IgnoreError();
  rate_limiter_.Delete();
  outbox->garbage.push_back(std::move(it->second.item));
  entries_.erase(it);
}

void Table::SampleLocked(const ItemSelector::KeyWithProbability& pick,
                         SampleRequest* request, Outbox* outbox) {
  Entry& entry = entries_.find(pick.key)->second;
  if (entry.times_sampled == 0) ++num_unique_samples_;
  ++entry.times_sampled;
  request->bytes += entry.chunk_bytes;
  request->items.push_back(SampledItem{
      entry.item, pick.probability, static_cast<int64_t>(entries_.size()),
      entry.priority, entry.times_sampled, request->rate_limited});
  if (max_times_sampled_ > 0 && entry.times_sampled >= max_times_sampled_) {
    DeleteLocked(pick.key, outbox);
  }
}

void Table::SampleBatchLocked(SampleRequest* request, Outbox* outbox) {
  // The rate limiter counts exactly the items in entries_; the emptiness
  // check only keeps a broken invariant from becoming a crash.
  auto has_room = [&] {
    return static_cast<int32_t>(request->items.size()) < request->batch_size &&
           request->bytes < request->max_bytes && !entries_.empty();
  };
  if (max_times_sampled_ > 0) {
    // Each sample may delete its item, so every pick must see the table as
    // the previous sample left it.
    while (has_room() && rate_limiter_.MaybeCommitSample()) {
      SampleLocked(sampler_->Sample(), request, outbox);
    }
    return;
  }
  // Sampling changes nothing the selector sees, so picks can be drawn a few
  // samples ahead and the memory they touch prefetched: in a large table
  // each pick is otherwise a chain of cache misses. A pick drawn ahead but
  // not used (batch full, rate limited) is dropped, which leaves the
  // distribution of the used picks unchanged.
  std::array<ItemSelector::KeyWithProbability, kSampleLookahead> ahead;
  size_t head = 0, count = 0;
  const size_t wanted = std::min<size_t>(
      kSampleLookahead, request->batch_size - request->items.size());
  while (has_room() && rate_limiter_.MaybeCommitSample()) {
    while (count < wanted) {
      const auto pick = sampler_->Sample();
      entries_.prefetch(pick.key);
      ahead[(head + count++) % kSampleLookahead] = pick;
    }
    const auto pick = ahead[head];
    head = (head + 1) % kSampleLookahead;
    --count;
    if (count > 0) {
      // The next pick's slot is in cache by now; fetch its item's reference
      // count, which the copy into SampledItem writes.
      const auto next = entries_.find(ahead[head].key);
      __builtin_prefetch(
          reinterpret_cast<const char*>(next->second.item.get()) - 16, 1);
    }
    SampleLocked(pick, request, outbox);
  }
}

// ---------------------------------------------------------------------------
// Worker.

void Table::FinishSampleRequest(SampleRequest* request, absl::Status status,
                                Outbox* outbox) {
  auto done = std::move(request->done);
  if (status.ok()) {
    outbox->callbacks.push_back(
        [done = std::move(done), items = std::move(request->items)]() mutable {
          done(std::move(items));
        });
  } else {
    outbox->callbacks.push_back(
        [done = std::move(done), status = std::move(status)]() mutable {
          done(std::move(status));
        });
  }
}

void Table::DropCancelled(Outbox* outbox) {
  DropCancelledRequests(&samples_, [&](SampleRequest* request) {
    FinishSampleRequest(
        request, absl::CancelledError("The sample request was cancelled."),
        outbox);
  });
  // Inserts are many while their rate limiter holds them back: looked
  // through only after a Cancel (ServeRequests checks each one it does).
  if (cancels_dropped_ == cancels_) return;
  cancels_dropped_ = cancels_;
  DropCancelledRequests(&inserts_, [&](InsertRequest* request) {
    --worker_inserts_;
    // Its chunks are released outside the lock, as a removed item's.
    outbox->garbage.push_back(
        std::make_shared<TableItem>(std::move(request->item)));
    outbox->callbacks.push_back(
        [done = std::move(request->done)] { done(InsertCancelled()); });
  });
}

bool Table::ServeRequests(Outbox* outbox) {
  bool progress = false;
  MutexLock lock(&mu_);
  DropCancelled(outbox);
  const absl::Time start = absl::Now();
  for (int round = 0; round < kMaxRoundsPerLock; ++round) {
    bool round_progress = false;
    if (!inserts_.empty() &&
        (IsCancelled(inserts_.front()) || rate_limiter_.CanInsert(1))) {
      InsertRequest request = std::move(inserts_.front());
      inserts_.pop_front();
      --worker_inserts_;
      absl::Status status = InsertCancelled();
      if (IsCancelled(request)) {
        outbox->garbage.push_back(
            std::make_shared<TableItem>(std::move(request.item)));
      } else {
        const absl::Time insert_start = absl::Now();
        status = InsertOrAssignLocked(std::move(request.item), outbox);
        AddWorkerTime(kInserting, absl::Now() - insert_start);
      }
      outbox->callbacks.push_back(
          [done = std::move(request.done), status = std::move(status)] {
            done(status);
          });
      round_progress = true;
    } else if (!inserts_.empty() && !inserts_.front().blocked) {
      inserts_.front().blocked = true;
      inserts_blocked_.fetch_add(1, std::memory_order_relaxed);
    }
    if (!samples_.empty()) {
      SampleRequest& request = samples_.front();
      const size_t before = request.items.size();
      const absl::Time sample_start = absl::Now();
      SampleBatchLocked(&request, outbox);
      AddWorkerTime(kSampling, absl::Now() - sample_start);
      round_progress |= request.items.size() > before;
      if (static_cast<int32_t>(request.items.size()) == request.batch_size ||
          request.bytes >= request.max_bytes) {
        FinishSampleRequest(&request, absl::OkStatus(), outbox);
        samples_.pop_front();
        round_progress = true;
      }
    }
    if (!round_progress) break;
    progress = true;
  }
  AddWorkerTime(kRunning, absl::Now() - start);
  return progress;
}

absl::Time Table::AnswerStalledSamples(Outbox* outbox) {
  // Flexible batch: a request that holds items is answered rather than kept
  // waiting for more.
  if (!samples_.empty() && !samples_.front().items.empty()) {
    FinishSampleRequest(&samples_.front(), absl::OkStatus(), outbox);
    samples_.pop_front();
  }
  const absl::Time now = absl::Now();
  absl::Time earliest = absl::InfiniteFuture();
  std::deque<SampleRequest> waiting;
  for (SampleRequest& request : samples_) {
    if (request.deadline <= now) {
      FinishSampleRequest(
          &request,
          request.items.empty() ? RateLimiterTimeout() : absl::OkStatus(),
          outbox);
    } else {
      if (!request.rate_limited) {
        samples_blocked_.fetch_add(1, std::memory_order_relaxed);
      }
      request.rate_limited = true;
      earliest = std::min(earliest, request.deadline);
      waiting.push_back(std::move(request));
    }
  }
  samples_ = std::move(waiting);
  return earliest;
}

void Table::TakeIncomingLocked() {
  worker_inserts_ += static_cast<int64_t>(incoming_inserts_.size());
  std::move(incoming_inserts_.begin(), incoming_inserts_.end(),
            std::back_inserter(inserts_));
  std::move(incoming_samples_.begin(), incoming_samples_.end(),
            std::back_inserter(samples_));
  incoming_inserts_.clear();
  incoming_samples_.clear();
}

void Table::CancelAll(Outbox* outbox) {
  {
    MutexLock lock(&queue_mu_);
    TakeIncomingLocked();
  }
  for (InsertRequest& request : inserts_) {
    outbox->callbacks.push_back(
        [done = std::move(request.done)] { done(TableClosed()); });
  }
  for (SampleRequest& request : samples_) {
    FinishSampleRequest(&request, TableClosed(), outbox);
  }
  inserts_.clear();
  samples_.clear();
}

void Table::AddWorkerTime(WorkerState state, absl::Duration duration) {
  worker_time_[state] += duration;
}

void Table::WorkerLoop() {
  Outbox outbox;
  while (true) {
    {
      MutexLock lock(&queue_mu_);
      if (closed_) break;
      TakeIncomingLocked();
      wake_ = false;
      samples_waiting_ = !samples_.empty();
    }

    const bool progress = ServeRequests(&outbox);
    const absl::Time deadline =
        progress ? absl::InfiniteFuture() : AnswerStalledSamples(&outbox);
    // Release dropped items first, so that a confirmed caller sees their
    // chunks freed.
    outbox.garbage.clear();
    RunOutbox(&outbox.callbacks);
    if (progress) continue;

    const WorkerState state = !samples_.empty()   ? kWaitingForInserts
                              : !inserts_.empty() ? kWaitingForSamples
                                                  : kSleeping;
    const absl::Time sleep_start = absl::Now();
    {
      MutexLock lock(&queue_mu_);
      while (!closed_ && !wake_ && incoming_inserts_.empty() &&
             incoming_samples_.empty()) {
        if (queue_cv_.WaitWithDeadline(&queue_mu_, deadline)) break;
      }
    }
    MutexLock lock(&mu_);
    AddWorkerTime(state, absl::Now() - sleep_start);
  }
  CancelAll(&outbox);
  RunOutbox(&outbox.callbacks);
}

}  // namespace deepmind::reverb
