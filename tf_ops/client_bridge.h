// ClientBridge: what the TFClient kernels (client_ops.cc) need from the
// Reverb client, behind a header that includes only the C++ standard
// library (the kernels see TensorFlow's headers, this module's
// implementation ours; see sample_source.h for why the two never meet).
//
// A ClientBridge talks to one server, or to the shards of one replay buffer
// (as a Client over their addresses does). It connects lazily and keeps what
// later calls reuse: idle sample streams per table, idle insert streams,
// and the tables' signatures. All methods are thread-safe; concurrent calls
// run on streams of their own.
//
// Waits. Connecting waits up to 10 s for the server (then UNAVAILABLE); a
// sample waits for the table's rate limiter, and an insert for the server's
// confirmation (which the rate limiter may hold back), for as long as it
// takes, as dm-reverb's ops do, unless OpWaits ends them (op_waits.h: the
// process's exit, SIGINT) with CANCELLED, or the server stops answering
// (UNAVAILABLE once the channel's keepalive pings go unanswered,
// cc/client/connection.h).
#ifndef REVERB_TF_OPS_CLIENT_BRIDGE_H_
#define REVERB_TF_OPS_CLIENT_BRIDGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deepmind::reverb::tf_ops {

// A canonical status code (absl, gRPC and TF_Code agree; 0 is OK) and a
// message.
struct ClientStatus {
  int code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

// A tensor in the caller's memory: its dtype (a TF_DataType value), shape,
// and elements (the bytes of a numeric dtype, or one view per string).
struct TensorRef {
  int dtype = 0;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
  std::vector<std::string_view> strings;
};

// The first timestep of a sampled item: its SampleInfo and one tensor per
// column (the column's first row).
class SampledStep {
 public:
  SampledStep();
  ~SampledStep();

  uint64_t key() const;
  double probability() const;
  int64_t table_size() const;
  double priority() const;
  int32_t times_sampled() const;

  int num_columns() const;
  int dtype(int column) const;
  const std::vector<int64_t>& shape(int column) const;
  // A numeric column's elements.
  const void* data(int column) const;
  size_t bytes(int column) const;
  // A string column's elements.
  int64_t num_strings(int column) const;
  const std::string& string(int column, int64_t index) const;

 private:
  friend class ClientBridge;
  struct State;
  std::unique_ptr<State> state_;
};

class ClientBridge {
 public:
  // INVALID_ARGUMENT for no address, an empty one or one given twice.
  static ClientStatus Create(const std::vector<std::string>& server_addresses,
                             std::unique_ptr<ClientBridge>* bridge);
  ~ClientBridge();

  ClientBridge(const ClientBridge&) = delete;
  ClientBridge& operator=(const ClientBridge&) = delete;

  // True once credentials were registered for one of its addresses after
  // it was made (RegisterChannelSecurity): its channels use older ones.
  bool OutOfDate() const;

  // Samples one item of `table` and keeps its first timestep, which must
  // have one column of each of `dtypes` (TF_DataType values); errors in
  // dm-reverb's words.
  ClientStatus Sample(const std::string& table, const std::vector<int>& dtypes,
                      SampledStep* step);

  // Inserts `data` as one step, and an item of it into each of `tables`
  // with the priority at the same index. The step is checked against every
  // table's signature first: on a mismatch (or an unknown table, or a NaN
  // priority) nothing is inserted and the status is INVALID_ARGUMENT.
  ClientStatus Insert(const std::vector<TensorRef>& data,
                      const std::vector<std::string>& tables,
                      const std::vector<double>& priorities);

  // Sets the priorities of the items of `keys` in `table`; unknown keys are
  // ignored.
  ClientStatus UpdatePriorities(const std::string& table,
                                const std::vector<uint64_t>& keys,
                                const std::vector<double>& priorities);

 private:
  struct State;
  explicit ClientBridge(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

}  // namespace deepmind::reverb::tf_ops

#endif  // REVERB_TF_OPS_CLIENT_BRIDGE_H_
