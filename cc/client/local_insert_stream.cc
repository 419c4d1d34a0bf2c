#include "cc/client/local_insert_stream.h"

#include <algorithm>
#include <utility>

#include "cc/client/built_chunk.h"
#include "cc/core/errors.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {

void LocalInsertStream::State::End(absl::Status end_status) {
  if (ended) return;
  ended = true;
  status = std::move(end_status);
  cv.SignalAll();
  if (status.ok()) return;
  // Table::Cancel neither blocks nor calls back: safe under `mu`.
  for (const auto& weak : tables) {
    if (auto table = weak.lock()) table->Cancel(cancellation);
  }
}

LocalInsertStream::LocalInsertStream(Connection::TablesByName tables,
                                     ConfirmedCallback on_confirmed,
                                     EndedCallback on_ended)
    : on_confirmed_(std::move(on_confirmed)),
      on_ended_(std::move(on_ended)),
      server_tables_([&tables] {
        std::vector<std::shared_ptr<Table>> all;
        for (const auto& [name, table] : tables) all.push_back(table);
        return all;
      }()),
      session_([tables = std::move(tables)](const std::string& name)
                   -> absl::StatusOr<std::shared_ptr<Table>> {
        auto it = tables.find(name);
        if (it == tables.end()) return TableNotFound(name);
        return it->second;
      }) {
  confirmer_ = std::thread([this] { Confirm(); });
  SetThreadName(confirmer_, "reverb-confirm");
}

LocalInsertStream::~LocalInsertStream() {
  if (!joined_) {
    Cancel();
    Join().IgnoreError();
  }
}

bool LocalInsertStream::Write(
    const InsertStreamRequest& request,
    absl::Span<const std::shared_ptr<const ChunkData>> chunks, Then /*then*/) {
  {
    MutexLock lock(&state_->mu);
    // Back-pressure, as the server pauses reading the next request.
    while (!state_->ended && state_->pending >= max_pending_) {
      state_->cv.Wait(&state_->mu);
    }
    // As a call the server ended when it stopped, however recently.
    if (!state_->ended && ServerStopped()) {
      state_->End(absl::UnavailableError("The server has stopped."));
    }
    if (state_->ended) return false;
  }
  std::vector<std::shared_ptr<Chunk>> shared;
  shared.reserve(chunks.size());
  absl::Status status;
  for (const auto& chunk : chunks) {
    // A chunk built in shared memory (built_chunk.h) is kept as its bytes.
    const BuiltChunk* built = FindBuiltChunk(chunk);
    if (built == nullptr) {
      shared.push_back(Chunk::Share(chunk));
      continue;
    }
    auto parsed = Chunk::Parse(built->bytes);
    if (!parsed.ok()) {
      status = parsed.status();
      break;
    }
    shared.push_back(*std::move(parsed));
  }
  std::vector<PrioritizedItem> items(request.items().begin(),
                                     request.items().end());
  if (status.ok()) {
    status = session_.Process(
        std::move(shared), absl::MakeSpan(items),
        absl::MakeConstSpan(request.keep_chunk_keys().data(),
                            request.keep_chunk_keys().size()),
        [this](const std::shared_ptr<Table>& table, TableItem item) {
          return Insert(table, std::move(item));
        });
  }
  if (!status.ok()) {
    MutexLock lock(&state_->mu);
    state_->End(std::move(status));
  }
  return true;
}

absl::Status LocalInsertStream::Insert(const std::shared_ptr<Table>& table,
                                       TableItem item) {
  const uint64_t key = item.item.key();
  // As dm-reverb: at most 10% of the table queued (1..1000 items).
  max_pending_ =
      std::max<int64_t>(1, std::min<int64_t>(table->max_size() / 10, 1000));
  {
    MutexLock lock(&state_->mu);
    // Ended (cancelled, failed): its queued items are withdrawn, so is this.
    if (state_->ended) return absl::CancelledError("The stream has ended.");
    const bool known = std::any_of(
        state_->tables.begin(), state_->tables.end(),
        [&table](const std::weak_ptr<Table>& t) { return t.lock() == table; });
    if (!known) state_->tables.push_back(table);
    ++state_->pending;
  }
  table->CountLocalInserts(1);
  table->InsertOrAssignAsync(
      std::move(item),
      [state = state_, key](const absl::Status& status) {
        MutexLock lock(&state->mu);
        --state->pending;
        if (!status.ok()) {
          state->End(status);
          return;
        }
        state->confirmed.push_back(key);
        state->cv.SignalAll();
      },
      state_->cancellation);
  return absl::OkStatus();
}

void LocalInsertStream::Confirm() {
  std::vector<uint64_t> keys;
  while (true) {
    {
      MutexLock lock(&state_->mu);
      while (state_->confirmed.empty() && !state_->ended) {
        if (state_->cv.WaitWithTimeout(&state_->mu, kStopPoll) &&
            ServerStopped()) {
          state_->End(absl::UnavailableError("The server has stopped."));
        }
      }
      if (state_->confirmed.empty()) break;  // Ended, all handed on.
      keys.swap(state_->confirmed);
    }
    on_confirmed_(keys);
    keys.clear();
  }
  on_ended_();
}

bool LocalInsertStream::ServerStopped() const {
  return std::any_of(server_tables_.begin(), server_tables_.end(),
                     [](const auto& table) { return table->closed(); });
}

void LocalInsertStream::Cancel() {
  MutexLock lock(&state_->mu);
  state_->End(absl::CancelledError("The insert stream was cancelled."));
}

absl::Status LocalInsertStream::Close() {
  {
    MutexLock lock(&state_->mu);
    while (!state_->ended && state_->pending > 0) state_->cv.Wait(&state_->mu);
    state_->End(absl::OkStatus());
  }
  return Join();
}

absl::Status LocalInsertStream::Finish() {
  {
    MutexLock lock(&state_->mu);
    while (!state_->ended) state_->cv.Wait(&state_->mu);
  }
  absl::Status status = Join();
  return status.ok()
             ? absl::UnavailableError("The server ended the insert stream.")
             : status;
}

absl::Status LocalInsertStream::Join() {
  confirmer_.join();
  joined_ = true;
  MutexLock lock(&state_->mu);
  return state_->status;
}

}  // namespace deepmind::reverb
