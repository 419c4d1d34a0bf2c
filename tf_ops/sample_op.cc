// The ReverbSampleRows op: sampled rows of a table as TensorFlow tensors,
// written against TensorFlow's C kernel API only.
//
// `tensorflow/c/kernels.h` and `ops.h` are the ABI TensorFlow keeps stable
// across 2.x releases, so this library, built against one TensorFlow, loads
// and runs under others (tests/python/tf/versions_test.py). It includes no
// TensorFlow C++ header; the Reverb client is reached through the
// standard-types-only SampleSource (see sample_source.h for why).
//
// Each kernel instance owns one SampleSource, opened by its first run on
// the op's inputs (`server_address`, a string or a vector of the addresses
// of shards, and `table`, a string: constants, placeholders or function
// arguments alike). tf.data instantiates the
// functions of every iterator afresh, so each iterator of a dataset samples
// through its own streams, which close when the iterator is destroyed.
// Outputs: the five SampleInfo fields, then the data columns, each with a
// leading dimension of the rows fetched; with `nest_rows`, one more leading
// dimension: [1, rows, ...], or [0, 0, ...] with no rows. A run returns zero
// rows when none were ready within the source's wait (tf_ops/README.md says
// why and how the datasets skip them). The end
// of the sequence (`max_samples` reached or the rate limiter timed out) is
// an OutOfRange error, which ends the dataset: the Python side maps with
// `preserve_cardinality=False`, where tf.data takes OutOfRange from the
// function as the end of its input.

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"
#include "tf_ops/kernel_support.h"
#include "tf_ops/sample_source.h"

namespace deepmind::reverb::tf_ops {
namespace {

constexpr char kOpName[] = "ReverbSampleRows";
constexpr int kNumInfoOutputs = 5;

struct Kernel {
  SourceOptions options;
  // Outputs are [1, rows, ...], or [0, 0, ...] with no rows, so that
  // `unbatch` drops the runs that returned none (see Allocate).
  bool nest_rows = false;
  std::mutex mu;
  std::unique_ptr<SampleSource> source;
};

// The options from the node's attributes; false (with `status` set) if one
// is missing or malformed.
bool ReadOptions(TF_OpKernelConstruction* ctx, SourceOptions* options,
                 TF_Status* status) {
  const std::pair<const char*, int64_t*> ints[] = {
      {"max_in_flight_samples_per_worker",
       &options->max_in_flight_samples_per_worker},
      {"num_workers", &options->num_workers},
      {"max_samples_per_stream", &options->max_samples_per_stream},
      {"rate_limiter_timeout_ms", &options->rate_limiter_timeout_ms},
      {"max_samples", &options->max_samples},
      {"batch_size", &options->batch_size},
      {"fill_timeout_ms", &options->fill_timeout_ms},
  };
  for (const auto& [name, value] : ints) {
    TF_OpKernelConstruction_GetAttrInt64(ctx, name, value, status);
    if (TF_GetCode(status) != TF_OK) return false;
  }
  const std::pair<const char*, bool*> bools[] = {
      {"emit_timesteps", &options->emit_timesteps},
      {"drop_remainder", &options->drop_remainder},
  };
  for (const auto& [name, value] : bools) {
    TF_Bool flag = 0;
    TF_OpKernelConstruction_GetAttrBool(ctx, name, &flag, status);
    if (TF_GetCode(status) != TF_OK) return false;
    *value = flag != 0;
  }

  int32_t num_columns = 0;
  int32_t unused = 0;
  TF_OpKernelConstruction_GetAttrSize(ctx, "dtypes", &num_columns, &unused,
                                      status);
  if (TF_GetCode(status) != TF_OK) return false;
  std::vector<TF_DataType> dtypes(num_columns);
  TF_OpKernelConstruction_GetAttrTypeList(ctx, "dtypes", dtypes.data(),
                                          num_columns, status);
  std::vector<int64_t> ranks;
  std::vector<int64_t> dims;
  if (TF_GetCode(status) != TF_OK ||
      !GetInt64List(ctx, "ranks", &ranks, status) ||
      !GetInt64List(ctx, "dims", &dims, status)) {
    return false;
  }
  // `dims` holds the dimensions of all columns, one after the other; a
  // rank of -1 is an unknown rank (no dimensions).
  size_t next_dim = 0;
  for (size_t c = 0; c < ranks.size(); ++c) {
    if (ranks[c] < 0) {
      options->shapes.emplace_back(std::nullopt);
      continue;
    }
    if (next_dim + ranks[c] > dims.size()) break;
    options->shapes.emplace_back(std::vector<int64_t>(
        dims.begin() + next_dim, dims.begin() + next_dim + ranks[c]));
    next_dim += ranks[c];
  }
  if (ranks.size() != dtypes.size() || options->shapes.size() != ranks.size() ||
      next_dim != dims.size()) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "ReverbSampleRows: `ranks` and `dims` do not describe one "
                 "shape per dtype.");
    return false;
  }
  options->dtypes.assign(dtypes.begin(), dtypes.end());
  return true;
}

void* CreateKernel(TF_OpKernelConstruction* ctx) {
  auto kernel = std::make_unique<Kernel>();
  Status status;
  TF_Bool nest_rows = 0;
  TF_OpKernelConstruction_GetAttrBool(ctx, "nest_rows", &nest_rows, status.s);
  kernel->nest_rows = nest_rows != 0;
  if (!status.ok() || !ReadOptions(ctx, &kernel->options, status.s)) {
    TF_OpKernelConstruction_Failure(ctx, status.s);
    return nullptr;
  }
  return kernel.release();
}

void DeleteKernel(void* kernel) { delete static_cast<Kernel*>(kernel); }

// Allocates output `index` of `dtype` and shape [rows] + row_shape, or
// with `nest`, [1, rows] + row_shape ([0, 0] + row_shape without rows).
TF_Tensor* Allocate(TF_OpKernelContext* ctx, int index, TF_DataType dtype,
                    bool nest, int64_t rows,
                    const std::vector<int64_t>& row_shape, TF_Status* status) {
  std::vector<int64_t> dims = {rows};
  if (nest) dims.insert(dims.begin(), rows > 0 ? 1 : 0);
  dims.insert(dims.end(), row_shape.begin(), row_shape.end());
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;
  const size_t bytes = dtype == TF_STRING ? elements * sizeof(TF_TString)
                                          : elements * TF_DataTypeSize(dtype);
  return TF_AllocateOutput(ctx, index, dtype, dims.data(),
                           static_cast<int>(dims.size()), bytes, status);
}

// Writes one info field of every row to output `index`.
template <typename T>
bool WriteInfo(TF_OpKernelContext* ctx, int index, TF_DataType dtype, bool nest,
               const SampleSource& source,
               T (SampleSource::*get)(int64_t) const, TF_Status* status) {
  const int64_t rows = source.num_rows();
  TF_Tensor* tensor = Allocate(ctx, index, dtype, nest, rows, {}, status);
  if (TF_GetCode(status) != TF_OK) return false;
  T* out = static_cast<T*>(TF_TensorData(tensor));
  for (int64_t row = 0; row < rows; ++row) out[row] = (source.*get)(row);
  TF_DeleteTensor(tensor);
  return true;
}

bool WriteOutputs(TF_OpKernelContext* ctx, const Kernel& kernel,
                  const SampleSource& source, TF_Status* status) {
  const bool nest = kernel.nest_rows;
  if (!WriteInfo(ctx, 0, TF_UINT64, nest, source, &SampleSource::key, status) ||
      !WriteInfo(ctx, 1, TF_DOUBLE, nest, source, &SampleSource::probability,
                 status) ||
      !WriteInfo(ctx, 2, TF_INT64, nest, source, &SampleSource::table_size,
                 status) ||
      !WriteInfo(ctx, 3, TF_DOUBLE, nest, source, &SampleSource::priority,
                 status) ||
      !WriteInfo(ctx, 4, TF_INT32, nest, source, &SampleSource::times_sampled,
                 status)) {
    return false;
  }
  const std::vector<int>& dtypes = kernel.options.dtypes;
  for (size_t c = 0; c < dtypes.size(); ++c) {
    const TF_DataType dtype = static_cast<TF_DataType>(dtypes[c]);
    // With no rows there is no shape to report but the expected one.
    std::vector<int64_t> expected =
        kernel.options.shapes[c].value_or(std::vector<int64_t>());
    for (int64_t& d : expected) d = d < 0 ? 0 : d;
    const std::vector<int64_t>& row_shape =
        source.num_rows() > 0 ? source.row_shape(c) : expected;
    TF_Tensor* tensor =
        Allocate(ctx, kNumInfoOutputs + c, dtype, kernel.nest_rows,
                 source.num_rows(), row_shape, status);
    if (TF_GetCode(status) != TF_OK) return false;
    if (dtype == TF_STRING) {
      auto* out = static_cast<TF_TString*>(TF_TensorData(tensor));
      source.ForEachString(c, [&out](const std::string& s) {
        TF_TString_Copy(out++, s.data(), s.size());
      });
    } else if (source.num_rows() > 0) {
      source.CopyColumn(c, TF_TensorData(tensor));
    }
    TF_DeleteTensor(tensor);
  }
  return true;
}

void Compute(void* kernel_ptr, TF_OpKernelContext* ctx) {
  Kernel& kernel = *static_cast<Kernel*>(kernel_ptr);
  std::lock_guard<std::mutex> lock(kernel.mu);
  Status status;
  SourceStatus result;
  if (kernel.source == nullptr) {
    // The first run opens the source on its inputs; later runs sample from
    // it (an iterator samples one table of one server).
    SourceOptions& options = kernel.options;
    if (!GetStringsInput(ctx, 0, "server_address", &options.server_addresses,
                         status.s) ||
        !GetStringInput(ctx, 1, "table", &options.table, status.s)) {
      TF_OpKernelContext_Failure(ctx, status.s);
      return;
    }
    result = SampleSource::Open(options, &kernel.source);
  }
  // Zero rows: none within the source's wait; the caller asks again.
  if (result.ok()) result = kernel.source->Next();
  if (!result.ok()) {
    TF_SetStatus(status.s, static_cast<TF_Code>(result.code),
                 result.message.c_str());
  } else {
    WriteOutputs(ctx, kernel, *kernel.source, status.s);
  }
  if (!status.ok()) TF_OpKernelContext_Failure(ctx, status.s);
}

void UnknownShapes(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeInferenceContextSetUnknownShape(ctx, status);
}

void RegisterOp() {
  TF_OpDefinitionBuilder* op = TF_NewOpDefinitionBuilder(kOpName);
  for (const char* input : {"server_address: string", "table: string"}) {
    TF_OpDefinitionBuilderAddInput(op, input);
  }
  for (const char* attr :
       {"max_in_flight_samples_per_worker: int", "num_workers: int",
        "max_samples_per_stream: int", "rate_limiter_timeout_ms: int",
        "max_samples: int", "dtypes: list(type) >= 1", "ranks: list(int)",
        "dims: list(int)", "emit_timesteps: bool", "batch_size: int",
        "fill_timeout_ms: int", "drop_remainder: bool",
        "nest_rows: bool = false"}) {
    TF_OpDefinitionBuilderAddAttr(op, attr);
  }
  for (const char* output :
       {"key: uint64", "probability: double", "table_size: int64",
        "priority: double", "times_sampled: int32", "data: dtypes"}) {
    TF_OpDefinitionBuilderAddOutput(op, output);
  }
  TF_OpDefinitionBuilderSetIsStateful(op, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(op, &UnknownShapes);
  Status status;
  TF_RegisterOpDefinition(op, status.s);
  if (!status.ok()) return;
  TF_KernelBuilder* builder = TF_NewKernelBuilder(kOpName, "CPU", &CreateKernel,
                                                  &Compute, &DeleteKernel);
  TF_RegisterKernelBuilder(kOpName, builder, status.s);
}

// tf.load_op_library runs this while it loads the library.
const bool registered = (RegisterOp(), true);

}  // namespace
}  // namespace deepmind::reverb::tf_ops
