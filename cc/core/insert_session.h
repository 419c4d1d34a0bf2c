// InsertSession: what the server does with the requests of one insert
// stream, whoever carries them: the gRPC InsertReactor
// (cc/service/insert_reactor.h) or a writer in the server's process
// (cc/client/local_insert_stream.h). See docs/wire-protocol.md,
// "InsertStream".
//
// The chunks of a request go into a map of the stream (a key already there
// is ignored). A request with items then hands each item, in order, to
// `insert` with its table and the chunks it references, and afterwards
// drops from the map every chunk not in its `keep_chunk_keys`. A request
// without items releases nothing. What `insert` does with the item
// (queueing it into the table, counting it for back-pressure, confirming
// it) is the carrier's business; an error it returns ends the request.
//
// Errors (the first ends the stream): a request with neither chunks nor
// items (INVALID_ARGUMENT), an unknown table (NOT_FOUND, TableNotFound()),
// a chunk missing from the map (INTERNAL), a `keep_chunk_keys` naming a
// chunk the map lacks (FAILED_PRECONDITION), an error of `insert`. Items
// handed to `insert` before the error stay handed (the carrier withdraws
// them if it must).
//
// With a `held_bytes` account (cc/support/byte_budget.h), the map's chunks
// are counted in it: a chunk the account refuses fails its request with
// the account's RESOURCE_EXHAUSTED, and chunks dropped from the map are
// given back.
//
// Not thread-safe: one request at a time.
#ifndef REVERB_CC_CORE_INSERT_SESSION_H_
#define REVERB_CC_CORE_INSERT_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cc/core/chunk.h"
#include "cc/core/table.h"
#include "cc/core/table_item.h"
#include "cc/support/byte_budget.h"
#include "cc/support/export.h"
#include "reverb/cc/schema.pb.h"

namespace deepmind::reverb {

class REVERB_EXPORT InsertSession {
 public:
  // The table of a name, or its error (TableNotFound()).
  using FindTable =
      std::function<absl::StatusOr<std::shared_ptr<Table>>(const std::string&)>;
  using Insert =
      absl::FunctionRef<absl::Status(const std::shared_ptr<Table>&, TableItem)>;

  // `held_bytes` (null: none) must outlive the session.
  explicit InsertSession(FindTable find_table,
                         ByteBudget::Account* held_bytes = nullptr)
      : find_table_(std::move(find_table)), held_bytes_(held_bytes) {}
  ~InsertSession() { Clear(); }

  // One request: its chunks, then its items (moved from), then what to keep.
  absl::Status Process(std::vector<std::shared_ptr<Chunk>> chunks,
                       absl::Span<PrioritizedItem> items,
                       absl::Span<const uint64_t> keep_chunk_keys,
                       Insert insert);

  // Drops every chunk of the map (a stream that failed).
  void Clear();

 private:
  const FindTable find_table_;
  ByteBudget::Account* const held_bytes_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Chunk>> chunks_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CORE_INSERT_SESSION_H_
