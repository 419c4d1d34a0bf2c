#include "tf_ops/client_bridge.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cc/client/channel_security.h"
#include "cc/client/client.h"
#include "cc/client/legacy_writer.h"
#include "cc/client/sample.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/client/sampler.h"
#include "cc/support/status_macros.h"
#include "cc/tensor/signature.h"
#include "cc/tensor/tensor.h"
#include "tf_ops/op_waits.h"

namespace deepmind::reverb::tf_ops {
namespace {

// How often an insert waiting for its confirmation checks whether OpWaits
// has ended its wait.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(100);

ClientStatus ToClientStatus(const absl::Status& status) {
  return {static_cast<int>(status.code()), std::string(status.message())};
}

// Flushes `writer`, waiting for the server's confirmation in slices, so
// that OpWaits can end the wait.
absl::Status FlushInSlices(Writer& writer, uint64_t generation) {
  while (true) {
    const absl::Time start = absl::Now();
    absl::Status status = writer.Flush(kWaitSlice);
    // A slice that ran out (rather than an error that came at once) only
    // means the confirmation has not arrived yet.
    if (!absl::IsDeadlineExceeded(status) ||
        absl::Now() - start < kWaitSlice / 2) {
      return status;
    }
    REVERB_RETURN_IF_ERROR(OpWaits::Global().Check(generation));
  }
}

// As FlushInSlices, registered as a wait in progress.
absl::Status FlushUntilConfirmed(Writer& writer, uint64_t generation) {
  OpWaits& waits = OpWaits::Global();
  REVERB_RETURN_IF_ERROR(waits.Begin(generation));
  absl::Status status = FlushInSlices(writer, generation);
  waits.End();
  return status;
}

std::vector<Tensor> MakeStep(const std::vector<TensorRef>& data) {
  std::vector<Tensor> step(data.size());
  for (size_t c = 0; c < data.size(); ++c) {
    const TensorRef& ref = data[c];
    Tensor& tensor = step[c];
    tensor.dtype = static_cast<tensorflow::DataType>(ref.dtype);
    tensor.shape = ref.shape;
    if (tensor.IsString()) {
      tensor.strings.assign(ref.strings.begin(), ref.strings.end());
    } else if (ref.bytes > 0) {
      tensor.bytes.assign(static_cast<const char*>(ref.data), ref.bytes);
    }
  }
  return step;
}

// INVALID_ARGUMENT unless `data`, as one step, fits `specs` (dm-reverb's
// texts). A spec may describe the step, or the item of one step.
absl::Status CheckStep(const std::string& table,
                       const std::vector<SignatureSpec>& specs,
                       const std::vector<TensorRef>& data) {
  std::vector<SignatureSpec> given;
  for (const TensorRef& ref : data) {
    given.push_back(
        {"", static_cast<tensorflow::DataType>(ref.dtype), ref.shape});
  }
  if (given.size() != specs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Unable to CreateItem in table '", table,
        "' because Append was called with a tensor signature inconsistent "
        "with table signature.  Append for timestep offset 0 was called "
        "with ",
        given.size(), " tensors, but table requires ", specs.size(),
        " tensors per entry.  Table signature: ", DescribeSignature(specs),
        ", data signature: ", DescribeSignature(given), "."));
  }
  for (size_t c = 0; c < specs.size(); ++c) {
    std::vector<int64_t> as_item = {1};
    as_item.insert(as_item.end(), given[c].shape->begin(),
                   given[c].shape->end());
    if (given[c].dtype == specs[c].dtype &&
        (ShapesCompatible(specs[c].shape, given[c].shape) ||
         ShapesCompatible(specs[c].shape, as_item))) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "Unable to CreateItem in table '", table,
        "' because Append was called with a tensor signature inconsistent "
        "with the table signature. At timestep offset 0, flattened index ",
        c, ", saw a tensor of dtype ", DataTypeName(given[c].dtype), ", shape ",
        ShapeString(given[c].shape), ", but expected tensor '", specs[c].name,
        "' of dtype ", DataTypeName(specs[c].dtype),
        " and shape compatible with ", ShapeString(specs[c].shape),
        ".  (Flattened) table signature: ", DescribeSignature(specs),
        ", data signature: ", DescribeSignature(given), "."));
  }
  return absl::OkStatus();
}

}  // namespace

struct SampledStep::State {
  Sample sample;
  std::vector<std::vector<int64_t>> shapes;  // Of the first row.
  std::vector<size_t> row_bytes;             // Numeric columns.
  std::vector<int64_t> row_strings;          // String columns.
};

SampledStep::SampledStep() : state_(std::make_unique<State>()) {}
SampledStep::~SampledStep() = default;

uint64_t SampledStep::key() const { return state_->sample.info->item().key(); }
double SampledStep::probability() const {
  return state_->sample.info->probability();
}
int64_t SampledStep::table_size() const {
  return state_->sample.info->table_size();
}
double SampledStep::priority() const {
  return state_->sample.info->item().priority();
}
int32_t SampledStep::times_sampled() const {
  return state_->sample.info->item().times_sampled();
}
int SampledStep::num_columns() const {
  return static_cast<int>(state_->shapes.size());
}
int SampledStep::dtype(int column) const {
  return state_->sample.columns[column].dtype;
}
const std::vector<int64_t>& SampledStep::shape(int column) const {
  return state_->shapes[column];
}
const void* SampledStep::data(int column) const {
  return state_->sample.columns[column].bytes.data();
}
size_t SampledStep::bytes(int column) const {
  return state_->row_bytes[column];
}
int64_t SampledStep::num_strings(int column) const {
  return state_->row_strings[column];
}
const std::string& SampledStep::string(int column, int64_t index) const {
  return state_->sample.columns[column].strings[index];
}

struct ClientBridge::State {
  State(std::unique_ptr<Client> client,
        std::vector<std::pair<std::string, uint64_t>> registrations)
      : client(std::move(client)), registrations(std::move(registrations)) {}

  // One sample of `table`, on an idle stream if there is one.
  absl::StatusOr<reverb::Sample> SampleOne(const std::string& table);
  // The flattened signature of `table` (null if it has none), fetched from
  // the server if the table is not known yet.
  absl::StatusOr<std::shared_ptr<const std::vector<SignatureSpec>>> Signature(
      const std::string& table);
  absl::Status InsertOnce(Writer& writer, const std::vector<TensorRef>& data,
                          const std::vector<std::string>& tables,
                          const std::vector<double>& priorities,
                          uint64_t generation);

  const std::unique_ptr<Client> client;
  // Each address, with its ChannelSecurityRegistration when the client was
  // made.
  const std::vector<std::pair<std::string, uint64_t>> registrations;
  std::mutex mu;
  // Idle streams by table, and idle writers: kept for the next call, so
  // that it skips the call setup.
  std::unordered_map<std::string,
                     std::vector<std::unique_ptr<SampleStreamInterface>>>
      idle_streams;
  std::vector<std::unique_ptr<Writer>> idle_writers;
  // Every table of the last ServerInfo, with its signature (or null).
  std::unordered_map<std::string,
                     std::shared_ptr<const std::vector<SignatureSpec>>>
      signatures;
};

absl::StatusOr<reverb::Sample> ClientBridge::State::SampleOne(
    const std::string& table) {
  OpWaits& waits = OpWaits::Global();
  const uint64_t generation = waits.generation();
  std::unique_ptr<SampleStreamInterface> stream;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& idle = idle_streams[table];
    if (!idle.empty()) {
      stream = std::move(idle.back());
      idle.pop_back();
    }
  }
  bool reused = stream != nullptr;
  while (true) {
    if (stream == nullptr) {
      absl::StatusOr<std::unique_ptr<SampleStreamInterface>> made =
          client->NewSampleStream(table, kConnectTimeout);
      if (!made.ok()) return made.status();
      stream = *std::move(made);
    }
    REVERB_RETURN_IF_ERROR(waits.Begin(generation, stream.get()));
    const absl::Status requested = stream->Request(1, absl::InfiniteDuration());
    absl::StatusOr<reverb::Sample> sample =
        requested.ok() ? stream->Read()
                       : absl::StatusOr<reverb::Sample>(requested);
    waits.End(stream.get());
    if (sample.ok()) {
      if (stream->ok() && stream->outstanding() == 0) {
        std::lock_guard<std::mutex> lock(mu);
        idle_streams[table].push_back(std::move(stream));
      }
      return sample;
    }
    REVERB_RETURN_IF_ERROR(waits.Check(generation));
    if (!reused || !absl::IsUnavailable(sample.status())) {
      return sample.status();
    }
    // An idle stream the server has dropped (e.g. it restarted): once more
    // on a new one.
    reused = false;
    stream.reset();
  }
}

absl::StatusOr<std::shared_ptr<const std::vector<SignatureSpec>>>
ClientBridge::State::Signature(const std::string& table) {
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = signatures.find(table);
    if (it != signatures.end()) return it->second;
  }
  absl::StatusOr<ServerInfoResponse> info =
      client->ServerInfo(absl::InfiniteDuration());
  if (!info.ok()) return info.status();
  std::unordered_map<std::string,
                     std::shared_ptr<const std::vector<SignatureSpec>>>
      fetched;
  for (const TableInfo& table_info : info->table_info()) {
    std::shared_ptr<const std::vector<SignatureSpec>> specs;
    if (table_info.has_signature()) {
      absl::StatusOr<std::vector<SignatureSpec>> flat =
          FlattenSignature(table_info.signature());
      if (!flat.ok()) return flat.status();
      specs =
          std::make_shared<const std::vector<SignatureSpec>>(*std::move(flat));
    }
    fetched[table_info.name()] = std::move(specs);
  }
  std::lock_guard<std::mutex> lock(mu);
  signatures = std::move(fetched);
  auto it = signatures.find(table);
  if (it != signatures.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [name, unused] : signatures) names.push_back(name);
  std::sort(names.begin(), names.end());
  return absl::InvalidArgumentError(
      absl::StrCat("Unable to find signatures for table '", table,
                   "' in signature cache.  Available tables: ['",
                   absl::StrJoin(names, "', '"), "']."));
}

absl::Status ClientBridge::State::InsertOnce(
    Writer& writer, const std::vector<TensorRef>& data,
    const std::vector<std::string>& tables,
    const std::vector<double>& priorities, uint64_t generation) {
  absl::Status status = writer.Append(MakeStep(data));
  for (size_t i = 0; status.ok() && i < tables.size(); ++i) {
    status = writer.CreateItem(tables[i], 1, priorities[i]);
  }
  if (status.ok()) status = FlushUntilConfirmed(writer, generation);
  if (status.ok()) status = writer.NewEpisode();
  return status;
}

ClientStatus ClientBridge::Create(
    const std::vector<std::string>& server_addresses,
    std::unique_ptr<ClientBridge>* bridge) {
  std::vector<std::pair<std::string, uint64_t>> registrations;
  for (const std::string& address : server_addresses) {
    registrations.emplace_back(address, ChannelSecurityRegistration(address));
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create(server_addresses);
  if (!client.ok()) return ToClientStatus(client.status());
  bridge->reset(new ClientBridge(
      std::make_unique<State>(*std::move(client), std::move(registrations))));
  return {};
}

bool ClientBridge::OutOfDate() const {
  for (const auto& [address, registration] : state_->registrations) {
    if (ChannelSecurityRegistration(address) != registration) return true;
  }
  return false;
}

ClientBridge::ClientBridge(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

ClientBridge::~ClientBridge() = default;

ClientStatus ClientBridge::Sample(const std::string& table,
                                  const std::vector<int>& dtypes,
                                  SampledStep* step) {
  absl::StatusOr<reverb::Sample> sample = state_->SampleOne(table);
  if (!sample.ok()) return ToClientStatus(sample.status());
  absl::StatusOr<int64_t> steps = NumTimesteps(*sample);
  if (!steps.ok() || (*steps == 0 && !sample->columns.empty())) {
    return ToClientStatus(absl::InvalidArgumentError(
        "Sampled trajectory cannot be decomposed into timesteps."));
  }
  const std::vector<Tensor>& columns = sample->columns;
  if (columns.size() != dtypes.size()) {
    return ToClientStatus(absl::InvalidArgumentError(absl::StrCat(
        "Number of tensors in the replay sample did not match the expected "
        "count. Got ",
        columns.size() + Sampler::kNumInfoTensors, " but wanted ",
        dtypes.size() + Sampler::kNumInfoTensors)));
  }
  SampledStep::State& out = *step->state_;
  out.shapes.clear();
  out.row_bytes.clear();
  out.row_strings.clear();
  for (size_t c = 0; c < columns.size(); ++c) {
    const Tensor& column = columns[c];
    if (column.dtype != dtypes[c]) {
      return ToClientStatus(absl::InvalidArgumentError(absl::StrCat(
          "Type mismatch: actual ", DataTypeName(column.dtype), " vs. expect ",
          DataTypeName(static_cast<tensorflow::DataType>(dtypes[c])))));
    }
    const int64_t rows = column.shape[0];
    out.shapes.emplace_back(column.shape.begin() + 1, column.shape.end());
    out.row_bytes.push_back(column.bytes.size() / rows);
    out.row_strings.push_back(static_cast<int64_t>(column.strings.size()) /
                              rows);
  }
  out.sample = *std::move(sample);
  return {};
}

ClientStatus ClientBridge::Insert(const std::vector<TensorRef>& data,
                                  const std::vector<std::string>& tables,
                                  const std::vector<double>& priorities) {
  for (size_t i = 0; i < tables.size(); ++i) {
    absl::StatusOr<std::shared_ptr<const std::vector<SignatureSpec>>> specs =
        state_->Signature(tables[i]);
    if (!specs.ok()) return ToClientStatus(specs.status());
    if (*specs != nullptr) {
      absl::Status fits = CheckStep(tables[i], **specs, data);
      if (!fits.ok()) return ToClientStatus(fits);
    }
    if (std::isnan(priorities[i])) {
      return ToClientStatus(
          absl::InvalidArgumentError("`priority` must not be nan."));
    }
  }
  if (tables.empty()) return {};
  const uint64_t generation = OpWaits::Global().generation();
  std::unique_ptr<Writer> writer;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->idle_writers.empty()) {
      writer = std::move(state_->idle_writers.back());
      state_->idle_writers.pop_back();
    }
  }
  bool reused = writer != nullptr;
  while (true) {
    if (writer == nullptr) {
      WriterOptions options;
      options.max_in_flight_items = 1'000'000;
      absl::StatusOr<std::unique_ptr<Writer>> made =
          state_->client->NewWriter(options);
      if (!made.ok()) return ToClientStatus(made.status());
      writer = *std::move(made);
    }
    absl::Status status =
        state_->InsertOnce(*writer, data, tables, priorities, generation);
    if (status.ok()) {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->idle_writers.push_back(std::move(writer));
      return {};
    }
    if (!reused || !absl::IsUnavailable(status)) return ToClientStatus(status);
    // An idle writer whose stream the server has dropped: once more on a
    // new one (which the dropped one's items never reached).
    reused = false;
    writer.reset();
  }
}

ClientStatus ClientBridge::UpdatePriorities(
    const std::string& table, const std::vector<uint64_t>& keys,
    const std::vector<double>& priorities) {
  return ToClientStatus(state_->client->MutatePriorities(
      table, keys, priorities, {}, absl::InfiniteDuration()));
}

}  // namespace deepmind::reverb::tf_ops
