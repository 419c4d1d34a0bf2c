// LocalTable: how a table is handed, by address, to a client in the
// server's process (the InitializeConnection call, docs/wire-protocol.md).
//
// The server heap-allocates a LocalTableHandle holding the table and sends
// its address; the client (in the same process: the server checks the pid)
// copies the shared_ptr out, then says so, and the server frees the handle
// when the call ends. Only a client of this very libreverb may touch the
// handle (another build, or dm-reverb's library, has another Table class),
// so both sides check LibreverbIdentity(): the client sends it in its
// request and the server answers an address only if it is its own, and the
// handle carries it as its first field, which the client checks before
// trusting the rest (a dm-reverb server in the process would answer with a
// pointer to a plain std::shared_ptr of its own Table).
#ifndef REVERB_CC_CORE_LOCAL_TABLE_H_
#define REVERB_CC_CORE_LOCAL_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "cc/core/table.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

// Unique to the copy of libreverb loaded in this process (derived from the
// address of one of its objects and a constant): equal only between two
// callers in the same process and the same library.
REVERB_EXPORT uint64_t LibreverbIdentity();

struct REVERB_EXPORT LocalTableHandle {
  // LibreverbIdentity() of the server that made the handle.
  uint64_t identity;
  // The table asked for; null if the request named none (our extension).
  std::shared_ptr<Table> table;
  // Every table of the server (our extension: writers insert into any).
  std::vector<std::shared_ptr<Table>> tables;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_LOCAL_TABLE_H_
