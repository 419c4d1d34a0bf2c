#include "cc/client/local_insert_stream.h"

#include <algorithm>
#include <utility>

#include "cc/core/errors.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {

void LocalInsertStream::State::End(absl::Status end_status) {
  if (ended) return;
  ended = true;
  status = std::move(end_status);
  cv.SignalAll();
}

LocalInsertStream::LocalInsertStream(Connection::TablesByName tables,
                                     ConfirmedCallback on_confirmed,
                                     EndedCallback on_ended)
    : on_confirmed_(std::move(on_confirmed)),
      on_ended_(std::move(on_ended)),
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
    absl::Span<const std::shared_ptr<const ChunkData>> chunks) {
  {
    MutexLock lock(&state_->mu);
    if (state_->ended) return false;
  }
  std::vector<std::shared_ptr<Chunk>> shared;
  shared.reserve(chunks.size());
  for (const auto& chunk : chunks) shared.push_back(Chunk::Share(chunk));
  std::vector<PrioritizedItem> items(request.items().begin(),
                                     request.items().end());
  absl::Status status = session_.Process(
      std::move(shared), absl::MakeSpan(items),
      absl::MakeConstSpan(request.keep_chunk_keys().data(),
                          request.keep_chunk_keys().size()),
      [this](const std::shared_ptr<Table>& table, TableItem item) {
        Insert(table, std::move(item));
      });
  MutexLock lock(&state_->mu);
  if (!status.ok()) state_->End(std::move(status));
  // Back-pressure, as the server pauses reading.
  while (!state_->ended && state_->pending >= max_pending_) {
    state_->cv.Wait(&state_->mu);
  }
  return true;
}

void LocalInsertStream::Insert(const std::shared_ptr<Table>& table,
                               TableItem item) {
  const uint64_t key = item.item.key();
  // As dm-reverb: at most 10% of the table queued (1..1000 items).
  max_pending_ =
      std::max<int64_t>(1, std::min<int64_t>(table->max_size() / 10, 1000));
  {
    MutexLock lock(&state_->mu);
    ++state_->pending;
  }
  table->CountLocalInserts(1);
  table->InsertOrAssignAsync(
      std::move(item), [state = state_, key](const absl::Status& status) {
        MutexLock lock(&state->mu);
        --state->pending;
        if (!status.ok()) {
          state->End(status);
          return;
        }
        state->confirmed.push_back(key);
        state->cv.SignalAll();
      });
}

void LocalInsertStream::Confirm() {
  std::vector<uint64_t> keys;
  while (true) {
    {
      MutexLock lock(&state_->mu);
      while (state_->confirmed.empty() && !state_->ended) {
        state_->cv.Wait(&state_->mu);
      }
      if (state_->confirmed.empty()) break;  // Ended, all handed on.
      keys.swap(state_->confirmed);
    }
    on_confirmed_(keys);
    keys.clear();
  }
  on_ended_();
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
