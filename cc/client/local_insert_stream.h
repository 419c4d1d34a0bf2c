// LocalInsertStream: an InsertStream (insert_stream.h, whose contract it
// keeps) into the tables of a server in this process, handed over by
// InitializeConnection (Connection::LocalTables). InsertStream::Open makes
// one when there are such tables. The stream keeps the tables it was made
// with: once the server stops they are closed and inserts fail with
// CANCELLED, a transient error on which writers open a new stream.
//
// Write() does what the server does with a request (InsertSession,
// cc/core/insert_session.h), on the calling thread: the writer's chunks
// become the tables' chunks as they are (Chunk::Share: no serialization,
// no copy) and each item is queued into its table (Table::InsertOrAssignAsync,
// counted in TableInfo.num_local_inserts). An unknown table is NOT_FOUND
// with the server's text. As over gRPC, Write() returns false only if the
// stream had ended before it; the request's own error ends the stream.
// Back-pressure as the server's, which reads no further request while the
// stream has max(1, min(max_size / 10, 1000)) inserts queued (max_size of
// the table of the last item): Write() first waits until it has fewer (or
// the stream ends), then hands its request over and returns.
//
// Confirmations: each item is confirmed once its table has inserted it;
// the stream's thread ("reverb-confirm") hands the keys to `on_confirmed`
// and, once the stream has ended, calls `on_ended` once and stops. The
// first error (of a request, or an insert its table fails: CANCELLED when
// the server stops) ends the stream with that status. Close() waits until
// every item is confirmed and ends it with OK; Cancel() ends it at once
// with CANCELLED. A stream finds out that the server has stopped (its
// tables closed) at its next Write(), which then returns false, or within
// kStopPoll if idle, and ends with UNAVAILABLE, as a call to a server that
// has gone (the writers then reopen, as over gRPC). As
// the server's InsertReactor, a stream that ends otherwise than OK withdraws
// its items still queued at their tables (Table::Cancel): what it has not
// confirmed is not stored later.
#ifndef REVERB_CC_CLIENT_LOCAL_INSERT_STREAM_H_
#define REVERB_CC_CLIENT_LOCAL_INSERT_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/client/connection.h"
#include "cc/client/insert_stream.h"
#include "cc/core/insert_session.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

class REVERB_EXPORT LocalInsertStream final : public InsertStream {
 public:
  LocalInsertStream(Connection::TablesByName tables,
                    ConfirmedCallback on_confirmed, EndedCallback on_ended);
  // Cancels the stream unless Close() or Finish() has ended it.
  ~LocalInsertStream() override;

  bool Write(const InsertStreamRequest& request,
             absl::Span<const std::shared_ptr<const ChunkData>> chunks,
             Then then) override ABSL_LOCKS_EXCLUDED(state_->mu);
  void Cancel() override ABSL_LOCKS_EXCLUDED(state_->mu);
  absl::Status Close() override ABSL_LOCKS_EXCLUDED(state_->mu);
  absl::Status Finish() override ABSL_LOCKS_EXCLUDED(state_->mu);

 private:
  // What the tables' callbacks reach; shared with them, so that the stream
  // may go while its items wait in a table.
  struct State {
    Mutex mu;
    CondVar cv;
    std::vector<uint64_t> confirmed ABSL_GUARDED_BY(mu);
    int64_t pending ABSL_GUARDED_BY(mu) = 0;
    bool ended ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
    // The stream's inserts, and the tables it has queued them into (weak:
    // a table callback must not drop a table's last reference).
    const Table::Cancellation cancellation =
        std::make_shared<std::atomic<bool>>(false);
    std::vector<std::weak_ptr<Table>> tables ABSL_GUARDED_BY(mu);

    // Ends the stream with `status` unless it has ended; withdraws the
    // queued inserts if `status` is not OK.
    void End(absl::Status end_status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  };

  // Queues `item` into `table`; CANCELLED if the stream has ended.
  absl::Status Insert(const std::shared_ptr<Table>& table, TableItem item)
      ABSL_LOCKS_EXCLUDED(state_->mu);
  // How often an idle stream checks whether the server has stopped.
  static constexpr absl::Duration kStopPoll = absl::Milliseconds(100);

  // The confirmation thread.
  void Confirm() ABSL_LOCKS_EXCLUDED(state_->mu);
  // Whether a table of the server has closed (the server stops).
  bool ServerStopped() const;
  // Joins the thread and returns the final status.
  absl::Status Join() ABSL_LOCKS_EXCLUDED(state_->mu);

  const ConfirmedCallback on_confirmed_;
  const EndedCallback on_ended_;
  const std::shared_ptr<State> state_ = std::make_shared<State>();
  // Every table of the server (for ServerStopped).
  const std::vector<std::shared_ptr<Table>> server_tables_;
  InsertSession session_;    // Used by Write only.
  int64_t max_pending_ = 1;  // Used by Write only.
  std::thread confirmer_;
  bool joined_ = false;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_LOCAL_INSERT_STREAM_H_
