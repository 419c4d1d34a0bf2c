// SampleSource: what the TensorFlow sample kernel needs from the Reverb
// client, behind a header that includes only the C++ standard library.
//
// The kernel translation unit (sample_op.cc) includes TensorFlow's C API
// headers; this module's implementation includes ours (abseil, protobuf,
// gRPC from Debian). The two sets must never meet in one translation unit
// (TensorFlow's include directory carries its own protobuf and abseil), so
// everything crossing between them is a standard type.
//
// A SampleSource owns one Sampler. Each Next() call fetches "rows": in
// trajectory mode, up to `batch_size` whole samples (stacked, so all must
// have the same shapes); in timestep mode, the timesteps of one sample (a
// sample whose columns are all squeezed is one timestep, as in dm-reverb).
// Before the first sample, the table's signature (if it has one) is checked
// against the dtypes and shapes the dataset expects, and every column of
// every sample is checked again before it is handed over.
//
// Next() never waits longer than `max_wait_ms`: if no rows are ready by
// then it returns zero rows (OK), and the caller asks again. So a kernel
// blocked on the rate limiter returns to TensorFlow at least that often,
// which lets a cancelled iterator or a closed session end it (the C kernel
// API has no cancellation callback).
#ifndef REVERB_TF_OPS_SAMPLE_SOURCE_H_
#define REVERB_TF_OPS_SAMPLE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deepmind::reverb::tf_ops {

struct SourceOptions {
  // One server, or the shards of one replay buffer (at least one).
  std::vector<std::string> server_addresses;
  std::string table;
  int64_t max_in_flight_samples_per_worker = 100;
  int64_t num_workers = 1;
  int64_t max_samples_per_stream = -1;
  int64_t rate_limiter_timeout_ms = -1;  // -1: wait forever.
  int64_t max_samples = -1;              // -1: no limit.
  // Expected dtype (TF_DataType / tensorflow::DataType value) and shape of
  // one row of each column; -1 is an unknown dimension, nullopt an unknown
  // rank.
  std::vector<int> dtypes;
  std::vector<std::optional<std::vector<int64_t>>> shapes;
  bool emit_timesteps = false;
  // Trajectory mode: samples per Next(), and how long Next() waits for the
  // batch to fill once it has a first sample (-1: until it is full).
  int64_t batch_size = 1;
  int64_t fill_timeout_ms = -1;
  // Trajectory mode: a partial batch (the sequence ended) is dropped.
  bool drop_remainder = false;
  // The longest a Next() call waits (see above).
  int64_t max_wait_ms = 100;
  // How long the signature check waits for the server in all: a server
  // that has not answered by then fails the source with UNAVAILABLE (as
  // any client call without a timeout, kConnectTimeout).
  int64_t signature_timeout_ms = 10'000;
};

// An error: a canonical status code (absl, gRPC and TF_Code agree) and a
// message. Code 0 is OK.
struct SourceStatus {
  int code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

class SampleSource {
 public:
  // Connects lazily: Next() waits for the server. INVALID_ARGUMENT for no
  // address, an empty one or one given twice.
  static SourceStatus Open(const SourceOptions& options,
                           std::unique_ptr<SampleSource>* source);
  ~SampleSource();

  // Fetches the next rows; zero rows if none are ready within
  // `max_wait_ms` (a partial batch is kept for the next call). OUT_OF_RANGE
  // at the end of the sequence: `max_samples` reached or the rate limiter
  // timed out. A partial batch comes before the end, unless
  // `drop_remainder`. INVALID_ARGUMENT if the signature or a sample does not
  // match the expected dtypes and shapes.
  SourceStatus Next();

  int64_t num_rows() const;
  // Shape of one row of `column` (as checked against the options).
  const std::vector<int64_t>& row_shape(int column) const;
  // Copies the rows of a numeric column, one after the other, to `out`
  // (num_rows() * bytes of a row).
  void CopyColumn(int column, void* out) const;
  // Calls `emit` with every element of a string column, rows in order.
  template <typename F>
  void ForEachString(int column, F emit) const {
    for (const std::string* s : Strings(column)) emit(*s);
  }

  // SampleInfo of a row (the sample's, repeated for its timesteps).
  uint64_t key(int64_t row) const;
  double probability(int64_t row) const;
  int64_t table_size(int64_t row) const;
  double priority(int64_t row) const;
  int32_t times_sampled(int64_t row) const;

 private:
  struct State;
  explicit SampleSource(std::unique_ptr<State> state);

  std::vector<const std::string*> Strings(int column) const;

  std::unique_ptr<State> state_;
};

}  // namespace deepmind::reverb::tf_ops

#endif  // REVERB_TF_OPS_SAMPLE_SOURCE_H_
