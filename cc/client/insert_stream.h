// InsertStream: one InsertStream call, as both writers (legacy_writer.h and
// trajectory_writer.h) use it.
//
// What it sends: the writer's requests, as they are. Each Write() encodes
// an InsertStreamRequest (its items and keep_chunk_keys) and the chunks to
// send before them with EncodeInsertRequest (cc/wire/insert_request.h) and
// writes the bytes uncompressed. What goes into a request, and when, is the
// writer's business: batching, resending after a reconnect and keep-alive
// chunks stay there.
//
// Confirmations: from Open() on, a thread of the stream ("reverb-confirm")
// reads the server's responses and hands the keys of each to `on_confirmed`,
// in the order the server sends them. The server confirms an item once its
// table has inserted it, so items of one table are confirmed in the order
// written. When the call ends, for whatever reason, the thread calls
// `on_ended` once, after the last `on_confirmed`, and stops. Both callbacks
// run on that thread, possibly before Open() returns; they may lock the
// writer's mutex, so the writer must not hold it while it calls Finish(),
// Close() or the destructor (which join the thread), and they must not
// call into the stream themselves.
//
// Threading: Write() from one thread at a time; Cancel() from any thread at
// any time; Close() or Finish() once, from a thread that is not writing.
//
// When the server fails: it ends the call with an error status and stops
// reading. Its texts reach the writer unchanged, e.g. NOT_FOUND for an
// unknown table, INTERNAL "Could not find sequence chunk <key> for item
// <key>: it was not sent on this stream or not kept." for a missing chunk,
// CANCELLED when the server stops. Write() then returns false, `on_ended`
// runs, and Finish() returns that status; items not confirmed by then may
// or may not be in their tables.
//
// When the stream is closed: Close() half-closes the call: the server
// inserts every item it has received, confirms them all and ends the call
// with OK, which Close() returns (or the server's error). Cancel() ends the
// call at once, without waiting for outstanding items; Finish() then
// returns CANCELLED. A stream destroyed before Close() or Finish() is
// cancelled.
//
// Final status (Finish): the server's status, as FromGrpcStatus
// (cc/wire/grpc_status.h) converts it (so a broken connection is
// UNAVAILABLE); a call the server ended with OK although the writer had not
// closed it is UNAVAILABLE "The server ended the insert stream.".
//
// In the server's process (Connection::LocalTables) Open() makes a
// LocalInsertStream (local_insert_stream.h): the same contract, with
// chunks and items handed to the tables directly instead of a call.
//
// On the server's host (Connection::SharedMemory, asked again at each
// Open()), chunks from the session's min_chunk_bytes on go as shared-memory
// segments (shared_memory_client.h) instead of bytes in the request.
//
// Timeouts: Open() waits up to `connect_timeout` for the channel to connect,
// else returns UNAVAILABLE ("Could not connect to the Reverb server at ...
// within ...", see Connection::WaitForConnection); an unreachable or dead
// server fails there. The call itself is opened without wait-for-ready and
// has no deadline: a server that goes away later ends it (UNAVAILABLE or
// CANCELLED). Writers wait for confirmations with timeouts of their own and
// report them as WriterTimeout() (cc/core/errors.h).
#ifndef REVERB_CC_CLIENT_INSERT_STREAM_H_
#define REVERB_CC_CLIENT_INSERT_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/client/connection.h"
#include "cc/support/export.h"
#include "reverb/cc/reverb_service.pb.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT InsertStream {
 public:
  // Called with the keys of each response.
  using ConfirmedCallback = std::function<void(absl::Span<const uint64_t>)>;
  // Called once the call has ended.
  using EndedCallback = std::function<void()>;

  // Opens the call once `connection` is connected (UNAVAILABLE if it is not
  // within `connect_timeout`) and starts reading confirmations.
  static absl::StatusOr<std::unique_ptr<InsertStream>> Open(
      std::shared_ptr<const Connection> connection,
      absl::Duration connect_timeout, ConfirmedCallback on_confirmed,
      EndedCallback on_ended);

  // Cancels the call unless Close() or Finish() has ended it.
  virtual ~InsertStream() = default;

  // What the writing thread does once Write() returns. On the server's
  // host, a stream that sends chunks built in place makes segments ready
  // for the next ones (shared_memory_client.h): before the write while
  // other threads go on building chunks (they need them at once), after it
  // when the writer then waits for the request's confirmations (the server
  // works meanwhile).
  enum class Then { kMoreChunksFollow, kWaitForConfirmations };

  // Writes `request` (no chunks of its own) with `chunks` before its items.
  // Blocks while gRPC's flow control holds the bytes back. False once the
  // call has ended: Finish() tells why.
  virtual bool Write(const InsertStreamRequest& request,
                     absl::Span<const std::shared_ptr<const ChunkData>> chunks,
                     Then then) = 0;

  // Ends the call at once; thread-safe.
  virtual void Cancel() = 0;

  // No more writes: waits until the server has confirmed what it received
  // and ended the call, and returns its status.
  virtual absl::Status Close() = 0;

  // Waits until the call has ended (after a failed Write(), `on_ended` or
  // Cancel(); on a healthy call it waits for the server) and returns the
  // final status, never OK (see the top of this file).
  virtual absl::Status Finish() = 0;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_INSERT_STREAM_H_
