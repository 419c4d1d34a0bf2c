#include "tf_ops/sample_source.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cc/client.h"
#include "cc/sample.h"
#include "cc/sampler.h"
#include "cc/tensor.h"

namespace deepmind::reverb::tf_ops {

struct SampleSource::State {
  SourceOptions options;
  std::unique_ptr<Client> client;
  std::unique_ptr<Sampler> sampler;  // Created by the first Next().
  // The rows of the last Next(): whole samples, or one sample's timesteps.
  std::vector<Sample> samples;
  int64_t num_rows = 0;
  std::vector<std::vector<int64_t>> row_shapes;
  absl::Status error;  // Sticky once set.
};

namespace {

SourceStatus ToSourceStatus(const absl::Status& status) {
  return {static_cast<int>(status.code()), std::string(status.message())};
}

absl::Duration FromMs(int64_t ms) {
  return ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(ms);
}

bool Compatible(const std::vector<int64_t>& want,
                const std::vector<int64_t>& got) {
  if (want.size() != got.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] >= 0 && want[i] != got[i]) return false;
  }
  return true;
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

// Checks every column of `sample` against the expected dtypes and shapes
// and returns the shape of one row of each.
absl::StatusOr<std::vector<std::vector<int64_t>>> RowShapes(
    const SourceOptions& options, const Sample& sample) {
  if (sample.columns.size() != options.dtypes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Table '", options.table, "' returned ", sample.columns.size(),
        " columns but the dataset expects ", options.dtypes.size(), "."));
  }
  if (options.emit_timesteps) {
    absl::StatusOr<int64_t> steps = NumTimesteps(sample);
    if (!steps.ok()) return steps.status();
  }
  std::vector<std::vector<int64_t>> shapes;
  for (size_t c = 0; c < sample.columns.size(); ++c) {
    const Tensor& column = sample.columns[c];
    std::vector<int64_t> shape = column.shape;
    if (options.emit_timesteps) shape.erase(shape.begin());
    if (column.dtype != options.dtypes[c] ||
        !Compatible(options.shapes[c], shape)) {
      Tensor got{column.dtype, shape};
      Tensor want{static_cast<tensorflow::DataType>(options.dtypes[c]),
                  options.shapes[c]};
      return absl::InvalidArgumentError(absl::StrCat(
          "Sampled ", DescribeTensor(got), " from table '", options.table,
          "' where the dataset expects ", DescribeTensor(want),
          " (column ", c, "; -1 is any size)."));
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
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
  auto state = std::make_unique<State>();
  state->options = options;
  state->client = std::make_unique<Client>(options.server_address);
  source->reset(new SampleSource(std::move(state)));
  return {};
}

SourceStatus SampleSource::Next() {
  State& s = *state_;
  s.samples.clear();
  s.num_rows = 0;
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
  if (s.error.ok()) {
    const int batch = s.options.emit_timesteps
                          ? 1
                          : static_cast<int>(s.options.batch_size);
    absl::StatusOr<std::vector<Sample>> samples = s.sampler->GetNextBatch(
        batch, absl::InfiniteDuration(), FromMs(s.options.fill_timeout_ms));
    if (samples.ok()) {
      s.samples = *std::move(samples);
    } else {
      s.error = samples.status();
    }
  }
  // max_samples reached, or the table's rate limiter timed out: the end.
  if (absl::IsOutOfRange(s.error) || absl::IsDeadlineExceeded(s.error)) {
    return {};
  }
  if (!s.error.ok()) return ToSourceStatus(s.error);

  for (size_t i = 0; i < s.samples.size(); ++i) {
    if (i > 0 && HasRows(s.options, s.samples[i], s.row_shapes)) continue;
    absl::StatusOr<std::vector<std::vector<int64_t>>> shapes =
        RowShapes(s.options, s.samples[i]);
    if (!shapes.ok()) {
      s.error = shapes.status();
    } else if (i == 0) {
      s.row_shapes = *std::move(shapes);
    } else if (*shapes != s.row_shapes) {
      s.error = absl::InvalidArgumentError(absl::StrCat(
          "Samples of table '", s.options.table,
          "' have different shapes and cannot be batched: [",
          absl::StrJoin(s.row_shapes[0], ","), "] and [",
          absl::StrJoin((*shapes)[0], ","), "] (first columns)."));
    }
    if (!s.error.ok()) {
      s.samples.clear();
      return ToSourceStatus(s.error);
    }
  }
  if (s.options.drop_remainder && !s.options.emit_timesteps &&
      static_cast<int64_t>(s.samples.size()) < s.options.batch_size) {
    s.samples.clear();
  }
  s.num_rows = s.options.emit_timesteps && !s.samples.empty()
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

namespace {

const SampleInfo& InfoOfRow(const std::vector<Sample>& samples, bool steps,
                            int64_t row) {
  return *samples[steps ? 0 : row].info;
}

}  // namespace

uint64_t SampleSource::key(int64_t row) const {
  return InfoOfRow(state_->samples, state_->options.emit_timesteps, row)
      .item()
      .key();
}

double SampleSource::probability(int64_t row) const {
  return InfoOfRow(state_->samples, state_->options.emit_timesteps, row)
      .probability();
}

int64_t SampleSource::table_size(int64_t row) const {
  return InfoOfRow(state_->samples, state_->options.emit_timesteps, row)
      .table_size();
}

double SampleSource::priority(int64_t row) const {
  return InfoOfRow(state_->samples, state_->options.emit_timesteps, row)
      .item()
      .priority();
}

int32_t SampleSource::times_sampled(int64_t row) const {
  return InfoOfRow(state_->samples, state_->options.emit_timesteps, row)
      .item()
      .times_sampled();
}

}  // namespace deepmind::reverb::tf_ops
