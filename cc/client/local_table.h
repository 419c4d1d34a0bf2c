// AskLocalTable: the client side of InitializeConnection (the in-process
// path; the protocol and the handle: cc/core/local_table.h,
// cc/service/initialize_connection_reactor.h).
//
// Sends this process's pid, `table` and this libreverb's identity. If the
// server answers an address, it is in this process: the handle there must
// carry our identity too (else it is not ours, e.g. a dm-reverb server's,
// and is left alone); its table is copied out, the server is told so, and
// the table is returned. Returns null if the server is elsewhere (address
// 0, no answer) or is not ours; an error if the call fails (NOT_FOUND for
// an unknown table, UNAVAILABLE, DEADLINE_EXCEEDED after `timeout`).
#ifndef REVERB_CC_CLIENT_LOCAL_TABLE_H_
#define REVERB_CC_CLIENT_LOCAL_TABLE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/core/table.h"
#include "cc/support/export.h"
#include "reverb/cc/reverb_service.grpc.pb.h"

namespace deepmind::reverb {

REVERB_EXPORT absl::StatusOr<std::shared_ptr<Table>> AskLocalTable(
    ReverbService::StubInterface* stub, const std::string& table,
    absl::Duration timeout);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_LOCAL_TABLE_H_
