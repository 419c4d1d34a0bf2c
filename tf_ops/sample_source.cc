#include "tf_ops/sample_source.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cc/client/client.h"
#include "cc/client/sample.h"
#include "cc/client/sampler.h"
#include "cc/tensor/signature.h"
#include "cc/tensor/tensor.h"

namespace deepmind::reverb::tf_ops {

struct SampleSource::State {
  SourceOptions options;
  std::unique_ptr<Client> client;
  // The signature check's deadline, once it has begun.
  absl::Time signature_deadline = absl::InfiniteFuture();
  bool signature_checked = false;
  std::unique_ptr<Sampler> sampler;  // Created after the signature check.
  // The batch being filled, and when it stops waiting for more.
  std::vector<Sample> pending;
  absl::Time fill_deadline = absl::InfiniteFuture();
  // The rows of the last Next(): whole samples, or one sample's timesteps.
  std::vector<Sample> samples;
  int64_t num_rows = 0;
  std::vector<std::vector<int64_t>> row_shapes;
  absl::Status error;  // Sticky once set.

  // Checks the table's signature (once); false while it still waits for
  // the server (until `deadline` in this call).
  bool CheckedSignature(absl::Time deadline);

  // The info of `row` of `samples`: of its sample, or with timesteps of the
  // one sample.
  const SampleInfo& info(int64_t row) const {
    return *samples[options.emit_timesteps ? 0 : row].info;
  }
};

namespace {

SourceStatus ToSourceStatus(const absl::Status& status) {
  return {static_cast<int>(status.code()), std::string(status.message())};
}

absl::Duration FromMs(int64_t ms) {
  return ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(ms);
}

tensorflow::DataType DataTypeOf(int dtype) {
  return static_cast<tensorflow::DataType>(dtype);
}

// The dataset's specs, named "?" (they have no names), for messages.
std::string DescribeRequested(const SourceOptions& options) {
  std::vector<SignatureSpec> specs;
  for (size_t c = 0; c < options.dtypes.size(); ++c) {
    specs.push_back({"?", DataTypeOf(options.dtypes[c]), options.shapes[c]});
  }
  return DescribeSignature(specs);
}

// INVALID_ARGUMENT unless the table's signature has the dataset's dtypes
// and compatible shapes (dm-reverb's texts).
absl::Status CheckSignature(const SourceOptions& options,
                            const tensorflow::StructuredValue& signature) {
  absl::StatusOr<std::vector<SignatureSpec>> specs =
      FlattenSignature(signature);
  if (!specs.ok()) return specs.status();
  if (specs->size() != options.dtypes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Inconsistent number of tensors requested from table '", options.table,
        "'.  Requested ", options.dtypes.size(),
        " tensors, but table signature shows ", specs->size(),
        " tensors.  Table signature: ", DescribeSignature(*specs)));
  }
  for (size_t c = 0; c < specs->size(); ++c) {
    const SignatureSpec& spec = (*specs)[c];
    if (spec.dtype != DataTypeOf(options.dtypes[c]) ||
        !ShapesCompatible(spec.shape, options.shapes[c])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Requested incompatible tensor at flattened index ", c,
          " from table '", options.table, "'.  Requested (dtype, shape): (",
          DataTypeName(DataTypeOf(options.dtypes[c])), ", ",
          ShapeString(options.shapes[c]), ").  Signature (dtype, shape): (",
          DataTypeName(spec.dtype), ", ", ShapeString(spec.shape),
          ").  Table signature: ", DescribeSignature(*specs)));
    }
  }
  return absl::OkStatus();
}

// Whether `sample` has the dataset's dtypes and rows of `row_shapes` (those
// of a sample RowShapes accepted), checked without copying shapes: the
// common case for every sample of a batch after the first.
bool HasRows(const SourceOptions& options, const Sample& sample,
             const std::vector<std::vector<int64_t>>& row_shapes) {
  if (options.emit_timesteps || sample.columns.size() != row_shapes.size()) {
    return false;
  }
  for (size_t c = 0; c < sample.columns.size(); ++c) {
    const Tensor& column = sample.columns[c];
    if (column.dtype != options.dtypes[c] || column.shape != row_shapes[c]) {
      return false;
    }
  }
  return true;
}

// Whether every column of `sample` is squeezed (a single step without a
// time dimension): in timestep mode such a sample is one timestep, whole.
bool AllSqueezed(const Sample& sample) {
  const auto& columns = sample.info->item().flat_trajectory().columns();
  if (columns.empty()) return false;
  for (const auto& column : columns) {
    if (!column.squeeze()) return false;
  }
  return true;
}

// Checks every column of `sample` against the expected dtypes and shapes
// and returns the shape of one row of each.
absl::StatusOr<std::vector<std::vector<int64_t>>> RowShapes(
    const SourceOptions& options, const Sample& sample) {
  if (sample.columns.size() != options.dtypes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Table '", options.table, "' returned ", sample.columns.size(),
        " columns but the dataset expects ", options.dtypes.size(), "."));
  }
  const bool split = options.emit_timesteps && !AllSqueezed(sample);
  if (split && !NumTimesteps(sample).ok()) {
    return absl::InvalidArgumentError(
        "Sampled trajectory cannot be decomposed into timesteps.");
  }
  std::vector<std::vector<int64_t>> shapes;
  for (size_t c = 0; c < sample.columns.size(); ++c) {
    const Tensor& column = sample.columns[c];
    std::vector<int64_t> shape = column.shape;
    if (split) shape.erase(shape.begin());
    if (column.dtype != options.dtypes[c] ||
        !ShapesCompatible(options.shapes[c], shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Received incompatible tensor at flattened index ", c,
          " from table '", options.table,
          "'.  Specification has (dtype, shape): (",
          DataTypeName(DataTypeOf(options.dtypes[c])), ", ",
          ShapeString(options.shapes[c]), ").  Tensor has (dtype, shape): (",
          DataTypeName(column.dtype), ", ", ShapeString(shape),
          ").\nTable signature: ", DescribeRequested(options)));
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

// The end of the sequence (`max_samples` reached, or the table's rate
// limiter timed out) as OUT_OF_RANGE; other errors as they are.
SourceStatus EndOrError(const absl::Status& error) {
  if (absl::IsOutOfRange(error) || absl::IsDeadlineExceeded(error)) {
    return {static_cast<int>(absl::StatusCode::kOutOfRange),
            "End of sequence."};
  }
  return ToSourceStatus(error);
}

}  // namespace

SampleSource::SampleSource(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

SampleSource::~SampleSource() {
  if (state_->sampler != nullptr) state_->sampler->Close();
}

SourceStatus SampleSource::Open(const SourceOptions& options,
                                std::unique_ptr<SampleSource>* source) {
  if (options.dtypes.size() != options.shapes.size() ||
      options.batch_size < 1) {
    return ToSourceStatus(absl::InvalidArgumentError(
        "SampleSource: dtypes and shapes differ in length, or batch_size < "
        "1."));
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create(options.server_addresses);
  if (!client.ok()) return ToSourceStatus(client.status());
  auto state = std::make_unique<State>();
  state->options = options;
  state->client = *std::move(client);
  source->reset(new SampleSource(std::move(state)));
  return {};
}

bool SampleSource::State::CheckedSignature(absl::Time deadline) {
  int64_t timeout_ms = options.signature_timeout_ms;
  if (options.rate_limiter_timeout_ms > 0) {
    timeout_ms = std::min(timeout_ms, options.rate_limiter_timeout_ms);
  }
  if (signature_deadline == absl::InfiniteFuture()) {
    signature_deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  }
  absl::StatusOr<ServerInfoResponse> info =
      client->ServerInfo(std::min(deadline, signature_deadline) - absl::Now());
  if (absl::IsDeadlineExceeded(info.status()) &&
      absl::Now() < signature_deadline) {
    return false;
  }
  signature_checked = true;
  if (absl::IsDeadlineExceeded(info.status())) {
    error = absl::UnavailableError(absl::StrCat(
        "The Reverb server did not answer within ",
        absl::FormatDuration(absl::Milliseconds(timeout_ms)),
        " (to check the signature of table '", options.table, "')."));
    return true;
  }
  if (!info.ok()) {
    error = info.status();
    return true;
  }
  for (const TableInfo& table : info->table_info()) {
    if (table.name() == options.table && table.has_signature()) {
      error = CheckSignature(options, table.signature());
    }
  }
  return true;
}

SourceStatus SampleSource::Next() {
  State& s = *state_;
  // The last rows have been copied out: their buffers serve the next ones.
  for (Sample& sample : s.samples) RecycleSample(&sample);
  s.samples.clear();
  s.num_rows = 0;
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(s.options.max_wait_ms);
  if (s.error.ok() && !s.signature_checked && !s.CheckedSignature(deadline)) {
    return {};
  }
  if (s.error.ok() && s.sampler == nullptr) {
    SamplerOptions options;
    options.max_samples = s.options.max_samples;
    options.max_in_flight_samples_per_worker =
        s.options.max_in_flight_samples_per_worker;
    options.num_workers = static_cast<int>(s.options.num_workers);
    options.max_samples_per_stream = s.options.max_samples_per_stream;
    options.rate_limiter_timeout = FromMs(s.options.rate_limiter_timeout_ms);
    absl::StatusOr<std::unique_ptr<Sampler>> sampler =
        s.client->NewSampler(s.options.table, options);
    if (sampler.ok()) {
      s.sampler = *std::move(sampler);
    } else {
      s.error = sampler.status();
    }
  }
  const size_t batch_size =
      s.options.emit_timesteps ? 1 : static_cast<size_t>(s.options.batch_size);
  while (s.error.ok() && s.pending.size() < batch_size) {
    const absl::Time until =
        s.pending.empty() ? deadline : std::min(deadline, s.fill_deadline);
    absl::StatusOr<Sample> sample =
        s.sampler->GetNextSample(until - absl::Now());
    if (sample.ok()) {
      if (s.pending.empty()) {
        s.fill_deadline = absl::Now() + FromMs(s.options.fill_timeout_ms);
      }
      s.pending.push_back(*std::move(sample));
    } else if (absl::IsDeadlineExceeded(sample.status()) &&
               s.sampler->error().ok()) {
      // This call's own wait is over: hand over a batch whose fill timeout
      // has passed, or nothing yet.
      if (!s.pending.empty() && absl::Now() >= s.fill_deadline) break;
      return {};
    } else {
      s.error = sample.status();
    }
  }
  // A full batch, one whose fill timeout passed, or what came before the
  // end or an error (which the next call returns).
  if (s.options.drop_remainder && s.pending.size() < batch_size) {
    s.pending.clear();
  }
  if (s.pending.empty()) return EndOrError(s.error);
  s.samples = std::move(s.pending);
  s.pending.clear();

  // A sample that does not fit fails the sequence for good.
  for (size_t i = 0; i < s.samples.size(); ++i) {
    if (i > 0 && HasRows(s.options, s.samples[i], s.row_shapes)) continue;
    absl::StatusOr<std::vector<std::vector<int64_t>>> shapes =
        RowShapes(s.options, s.samples[i]);
    absl::Status mismatch = shapes.status();
    if (shapes.ok() && i == 0) {
      s.row_shapes = *std::move(shapes);
    } else if (shapes.ok() && *shapes != s.row_shapes) {
      mismatch = absl::InvalidArgumentError(
          absl::StrCat("Samples of table '", s.options.table,
                       "' have different shapes and cannot be batched: [",
                       absl::StrJoin(s.row_shapes[0], ","), "] and [",
                       absl::StrJoin((*shapes)[0], ","), "] (first columns)."));
    }
    if (!mismatch.ok()) {
      s.error = mismatch;
      s.samples.clear();
      return ToSourceStatus(s.error);
    }
  }
  s.num_rows = s.options.emit_timesteps && !AllSqueezed(s.samples[0])
                   ? s.samples[0].columns[0].shape[0]
                   : static_cast<int64_t>(s.samples.size());
  return {};
}

int64_t SampleSource::num_rows() const { return state_->num_rows; }

const std::vector<int64_t>& SampleSource::row_shape(int column) const {
  return state_->row_shapes[column];
}

void SampleSource::CopyColumn(int column, void* out) const {
  char* dst = static_cast<char*>(out);
  for (const Sample& sample : state_->samples) {
    const std::string& bytes = sample.columns[column].bytes;
    std::memcpy(dst, bytes.data(), bytes.size());
    dst += bytes.size();
  }
}

std::vector<const std::string*> SampleSource::Strings(int column) const {
  std::vector<const std::string*> strings;
  for (const Sample& sample : state_->samples) {
    for (const std::string& s : sample.columns[column].strings) {
      strings.push_back(&s);
    }
  }
  return strings;
}

uint64_t SampleSource::key(int64_t row) const {
  return state_->info(row).item().key();
}

double SampleSource::probability(int64_t row) const {
  return state_->info(row).probability();
}

int64_t SampleSource::table_size(int64_t row) const {
  return state_->info(row).table_size();
}

double SampleSource::priority(int64_t row) const {
  return state_->info(row).item().priority();
}

int32_t SampleSource::times_sampled(int64_t row) const {
  return state_->info(row).item().times_sampled();
}

}  // namespace deepmind::reverb::tf_ops
