// AskServerInfo: the ServerInfo of several servers, asked in parallel and
// waited for on the calling thread.
//
// `prepare(i, context)` sets up the call to connections[i] (its deadline,
// wait_for_ready) before it starts; the result holds each server's
// response or its error, in the order of `connections`. Returns once every
// call has ended.
//
// The calls go through a completion queue of their own, which only the
// calling thread polls, and only while it waits. Not through gRPC's
// callback API: in this gRPC its first use starts threads
// ("nexting_thread") that keep polling the process's sockets while the
// channels that used it live; a Sampler's worker, whose blocking reads of
// its streams then often find their responses read by those threads, is
// woken for them, with twice the context switches per sample over several
// shards (docs/benchmarks.md, "Sampling over shards").
//
// Thread-safe (each call has a queue of its own).
#ifndef REVERB_CC_CLIENT_ASK_SERVER_INFO_H_
#define REVERB_CC_CLIENT_ASK_SERVER_INFO_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cc/client/connection.h"
#include "cc/support/export.h"
#include "grpcpp/client_context.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {

REVERB_EXPORT std::vector<absl::StatusOr<ServerInfoResponse>> AskServerInfo(
    absl::Span<const std::shared_ptr<const Connection>> connections,
    absl::FunctionRef<void(int, grpc::ClientContext*)> prepare);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_ASK_SERVER_INFO_H_
