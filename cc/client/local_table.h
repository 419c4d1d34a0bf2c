// AskLocalTables: the client side of InitializeConnection (the in-process
// path; the protocol and the handle: cc/core/local_table.h,
// cc/service/initialize_connection_reactor.h).
//
// Sends this process's pid, no table name (our extension: all tables at
// once) and this libreverb's identity. If the server answers an address,
// it is in this process: the handle there must carry our identity too
// (else it is not ours, e.g. a dm-reverb server's, and is left alone); its
// tables are copied out, the server is told so, and they are returned.
// Returns none if the server is elsewhere (address 0, no answer) or is not
// ours; an error if the call fails (UNAVAILABLE, DEADLINE_EXCEEDED after
// `timeout`).
#ifndef REVERB_CC_CLIENT_LOCAL_TABLE_H_
#define REVERB_CC_CLIENT_LOCAL_TABLE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/core/table.h"
#include "cc/support/export.h"
#include "reverb/cc/reverb_service.grpc.pb.h"

namespace deepmind::reverb {

REVERB_EXPORT absl::StatusOr<std::vector<std::shared_ptr<Table>>>
AskLocalTables(ReverbService::StubInterface* stub, absl::Duration timeout);

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_LOCAL_TABLE_H_
