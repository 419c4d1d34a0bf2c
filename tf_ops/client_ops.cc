// The TFClient ops (ReverbClientSample, ReverbClientInsert,
// ReverbClientUpdatePriorities), written against TensorFlow's C kernel API
// only, like sample_op.cc; the Reverb client is reached through the
// standard-types-only ClientBridge (client_bridge.h).
//
// The ops are named as dm-reverb's and have its attributes and outputs, so
// that their errors read the same; where dm-reverb takes a client resource,
// these take `server_address`, a string input (a constant, a placeholder or
// a function argument, like `table`): one address, or a vector of the
// addresses of shards. Each kernel instance keeps one ClientBridge per
// address (or vector of them), made by its first run on it (and again after
// new credentials for it: Kernel):
// kernels live as long as their graph or tf.function, and eager mode
// caches them, so calls reuse their streams. Kernels run without Python.
//
// Shape functions check ranks when the graph is built: `tables` and
// `priorities` of an insert, and `keys` and `priorities` of an update, are
// vectors of the same length. In eager mode (which runs no shape
// functions) the kernels check the same, with dm-reverb's messages.

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"
#include "tf_ops/client_bridge.h"
#include "tf_ops/kernel_support.h"

namespace deepmind::reverb::tf_ops {
namespace {

constexpr char kSampleOp[] = "ReverbClientSample";
constexpr char kInsertOp[] = "ReverbClientInsert";
constexpr char kUpdateOp[] = "ReverbClientUpdatePriorities";
constexpr int kNumInfoOutputs = 5;

// A kernel's clients, one per list of server addresses. A client is made
// again once credentials were registered for one of its addresses since
// (TFClient(tls=..., auth_token=...), security.py), so that a TFClient made
// with new credentials for an address is not served by an older one's
// client; calls still running on the replaced client keep it alive.
struct Kernel {
  std::mutex mu;
  std::map<std::vector<std::string>, std::shared_ptr<ClientBridge>> clients;

  // Null (with `status` set) for addresses no client can be made of.
  std::shared_ptr<ClientBridge> Get(
      const std::vector<std::string>& server_addresses, ClientStatus* status) {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<ClientBridge>& client = clients[server_addresses];
    if (client == nullptr || client->OutOfDate()) {
      std::unique_ptr<ClientBridge> made;
      *status = ClientBridge::Create(server_addresses, &made);
      client = std::move(made);
    }
    return client;
  }
};

void* CreateKernel(TF_OpKernelConstruction*) { return new Kernel(); }

void DeleteKernel(void* kernel) { delete static_cast<Kernel*>(kernel); }

// The client for input 0 (`server_address`, one address or a vector of
// them); null (the run failed) if the input is neither or holds an empty
// address or one twice.
std::shared_ptr<ClientBridge> GetClient(void* kernel, TF_OpKernelContext* ctx) {
  Status status;
  std::vector<std::string> server_addresses;
  if (!GetStringsInput(ctx, 0, "server_address", &server_addresses, status.s)) {
    TF_OpKernelContext_Failure(ctx, status.s);
    return nullptr;
  }
  ClientStatus made;
  std::shared_ptr<ClientBridge> client =
      static_cast<Kernel*>(kernel)->Get(server_addresses, &made);
  if (!made.ok()) Fail(ctx, made.code, made.message);
  return client;
}

// Inputs `first` and `second` must be vectors of the same length (the
// kernel side of the shape functions, in dm-reverb's words); false (the run
// failed) otherwise.
bool CheckVectors(TF_OpKernelContext* ctx, const Input& first,
                  const Input& second, const char* names,
                  bool shapes_in_message) {
  if (TF_NumDims(first.t) != 1 || TF_NumDims(second.t) != 1) {
    Fail(ctx, TF_INVALID_ARGUMENT,
         std::string("Tensors ") + names + " must be of rank 1.");
    return false;
  }
  if (TF_Dim(first.t, 0) != TF_Dim(second.t, 0)) {
    std::string message =
        std::string("Tensors ") + names + " do not match in shape";
    message += shapes_in_message ? " (" + ShapeText(first.t) + " vs. " +
                                       ShapeText(second.t) + ")"
                                 : ".";
    Fail(ctx, TF_INVALID_ARGUMENT, message);
    return false;
  }
  return true;
}

// Allocates output `index` of `dtype` and `shape`; null (with `status`
// set) on failure.
TF_Tensor* Allocate(TF_OpKernelContext* ctx, int index, TF_DataType dtype,
                    const std::vector<int64_t>& shape, TF_Status* status) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  const size_t bytes = dtype == TF_STRING ? elements * sizeof(TF_TString)
                                          : elements * TF_DataTypeSize(dtype);
  TF_Tensor* tensor =
      TF_AllocateOutput(ctx, index, dtype, shape.data(),
                        static_cast<int>(shape.size()), bytes, status);
  return TF_GetCode(status) == TF_OK ? tensor : nullptr;
}

template <typename T>
bool WriteScalar(TF_OpKernelContext* ctx, int index, TF_DataType dtype, T value,
                 TF_Status* status) {
  TF_Tensor* tensor = Allocate(ctx, index, dtype, {}, status);
  if (tensor == nullptr) return false;
  *static_cast<T*>(TF_TensorData(tensor)) = value;
  TF_DeleteTensor(tensor);
  return true;
}

bool WriteStep(TF_OpKernelContext* ctx, const SampledStep& step,
               TF_Status* status) {
  if (!WriteScalar<uint64_t>(ctx, 0, TF_UINT64, step.key(), status) ||
      !WriteScalar<double>(ctx, 1, TF_DOUBLE, step.probability(), status) ||
      !WriteScalar<int64_t>(ctx, 2, TF_INT64, step.table_size(), status) ||
      !WriteScalar<double>(ctx, 3, TF_DOUBLE, step.priority(), status) ||
      !WriteScalar<int32_t>(ctx, 4, TF_INT32, step.times_sampled(), status)) {
    return false;
  }
  for (int c = 0; c < step.num_columns(); ++c) {
    const TF_DataType dtype = static_cast<TF_DataType>(step.dtype(c));
    TF_Tensor* tensor =
        Allocate(ctx, kNumInfoOutputs + c, dtype, step.shape(c), status);
    if (tensor == nullptr) return false;
    if (dtype == TF_STRING) {
      auto* out = static_cast<TF_TString*>(TF_TensorData(tensor));
      for (int64_t i = 0; i < step.num_strings(c); ++i) {
        const std::string& s = step.string(c, i);
        TF_TString_Copy(&out[i], s.data(), s.size());
      }
    } else if (step.bytes(c) > 0) {
      std::memcpy(TF_TensorData(tensor), step.data(c), step.bytes(c));
    }
    TF_DeleteTensor(tensor);
  }
  return true;
}

void ComputeSample(void* kernel, TF_OpKernelContext* ctx) {
  std::shared_ptr<ClientBridge> client = GetClient(kernel, ctx);
  Status status;
  std::string table;
  if (client == nullptr) return;
  if (!GetStringInput(ctx, 1, "table", &table, status.s)) {
    TF_OpKernelContext_Failure(ctx, status.s);
    return;
  }
  std::vector<int> dtypes;
  for (int i = kNumInfoOutputs; i < TF_NumOutputs(ctx); ++i) {
    dtypes.push_back(TF_ExpectedOutputDataType(ctx, i));
  }
  SampledStep step;
  ClientStatus result = client->Sample(table, dtypes, &step);
  if (!result.ok()) {
    Fail(ctx, result.code, result.message);
    return;
  }
  if (!WriteStep(ctx, step, status.s))
    TF_OpKernelContext_Failure(ctx, status.s);
}

// A view of a tensor's elements for the bridge.
TensorRef RefOf(const Input& input) {
  TensorRef ref;
  ref.dtype = TF_TensorType(input.t);
  for (int d = 0; d < TF_NumDims(input.t); ++d) {
    ref.shape.push_back(TF_Dim(input.t, d));
  }
  if (ref.dtype == TF_STRING) {
    const auto* strings =
        static_cast<const TF_TString*>(TF_TensorData(input.t));
    const int64_t n = TF_TensorElementCount(input.t);
    for (int64_t i = 0; i < n; ++i) {
      ref.strings.emplace_back(TF_TString_GetDataPointer(&strings[i]),
                               TF_TString_GetSize(&strings[i]));
    }
  } else {
    ref.data = TF_TensorData(input.t);
    ref.bytes = TF_TensorByteSize(input.t);
  }
  return ref;
}

// Inputs: server_address, data (T), tables, priorities.
void ComputeInsert(void* kernel, TF_OpKernelContext* ctx) {
  std::shared_ptr<ClientBridge> client = GetClient(kernel, ctx);
  if (client == nullptr) return;
  Status status;
  const int num_data = TF_NumInputs(ctx) - 3;
  std::vector<Input> inputs(num_data);
  std::vector<TensorRef> data;
  for (int i = 0; i < num_data; ++i) {
    if (!GetInput(ctx, 1 + i, &inputs[i], status.s)) {
      TF_OpKernelContext_Failure(ctx, status.s);
      return;
    }
    data.push_back(RefOf(inputs[i]));
  }
  Input tables_input;
  Input priorities_input;
  if (!GetInput(ctx, 1 + num_data, &tables_input, status.s) ||
      !GetInput(ctx, 2 + num_data, &priorities_input, status.s)) {
    TF_OpKernelContext_Failure(ctx, status.s);
    return;
  }
  if (!CheckVectors(ctx, tables_input, priorities_input,
                    "`tables` and `priorities`", false)) {
    return;
  }
  const int64_t n = TF_Dim(tables_input.t, 0);
  const auto* names =
      static_cast<const TF_TString*>(TF_TensorData(tables_input.t));
  const auto* values =
      static_cast<const double*>(TF_TensorData(priorities_input.t));
  std::vector<std::string> tables;
  for (int64_t i = 0; i < n; ++i) {
    tables.emplace_back(TF_TString_GetDataPointer(&names[i]),
                        TF_TString_GetSize(&names[i]));
  }
  ClientStatus result =
      client->Insert(data, tables, std::vector<double>(values, values + n));
  if (!result.ok()) Fail(ctx, result.code, result.message);
}

// Inputs: server_address, table, keys, priorities.
void ComputeUpdate(void* kernel, TF_OpKernelContext* ctx) {
  std::shared_ptr<ClientBridge> client = GetClient(kernel, ctx);
  if (client == nullptr) return;
  Status status;
  std::string table;
  Input keys;
  Input priorities;
  if (!GetStringInput(ctx, 1, "table", &table, status.s) ||
      !GetInput(ctx, 2, &keys, status.s) ||
      !GetInput(ctx, 3, &priorities, status.s)) {
    TF_OpKernelContext_Failure(ctx, status.s);
    return;
  }
  if (!CheckVectors(ctx, keys, priorities, "`keys` and `priorities`", true)) {
    return;
  }
  const int64_t n = TF_Dim(keys.t, 0);
  const auto* key_values = static_cast<const uint64_t*>(TF_TensorData(keys.t));
  const auto* priority_values =
      static_cast<const double*>(TF_TensorData(priorities.t));
  ClientStatus result = client->UpdatePriorities(
      table, std::vector<uint64_t>(key_values, key_values + n),
      std::vector<double>(priority_values, priority_values + n));
  if (!result.ok()) Fail(ctx, result.code, result.message);
}

void SampleShapes(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeInferenceContextSetUnknownShape(ctx, status);
  for (int i = 0; i < kNumInfoOutputs && TF_GetCode(status) == TF_OK; ++i) {
    TF_ShapeHandle* scalar = TF_ShapeInferenceContextScalar(ctx);
    TF_ShapeInferenceContextSetOutput(ctx, i, scalar, status);
    TF_DeleteShapeHandle(scalar);
  }
}

// Inputs `first` and `second` must be vectors of the same length.
void CheckVectorShapes(TF_ShapeInferenceContext* ctx, int first, int second,
                       const char* names, TF_Status* status) {
  TF_ShapeHandle* shapes[2] = {TF_NewShapeHandle(), TF_NewShapeHandle()};
  TF_DimensionHandle* dims[2] = {TF_NewDimensionHandle(),
                                 TF_NewDimensionHandle()};
  const int inputs[2] = {first, second};
  for (int i = 0; i < 2 && TF_GetCode(status) == TF_OK; ++i) {
    TF_ShapeInferenceContextGetInput(ctx, inputs[i], shapes[i], status);
    if (TF_GetCode(status) != TF_OK) break;
    TF_ShapeInferenceContextWithRank(ctx, shapes[i], 1, shapes[i], status);
    if (TF_GetCode(status) != TF_OK) break;
    if (TF_ShapeInferenceContextRankKnown(ctx, shapes[i])) {
      TF_ShapeInferenceContextDim(ctx, shapes[i], 0, dims[i]);
    }
  }
  if (TF_GetCode(status) == TF_OK && TF_DimensionHandleValueKnown(dims[0]) &&
      TF_DimensionHandleValueKnown(dims[1]) &&
      TF_DimensionHandleValue(dims[0]) != TF_DimensionHandleValue(dims[1])) {
    const std::string message =
        std::string("Tensors ") + names + " do not match in shape ([" +
        std::to_string(TF_DimensionHandleValue(dims[0])) + "] vs. [" +
        std::to_string(TF_DimensionHandleValue(dims[1])) + "])";
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message.c_str());
  }
  for (int i = 0; i < 2; ++i) {
    TF_DeleteShapeHandle(shapes[i]);
    TF_DeleteDimensionHandle(dims[i]);
  }
}

void InsertShapes(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  const int n = static_cast<int>(TF_ShapeInferenceContextNumInputs(ctx));
  CheckVectorShapes(ctx, n - 2, n - 1, "`tables` and `priorities`", status);
}

void UpdateShapes(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  CheckVectorShapes(ctx, 2, 3, "`keys` and `priorities`", status);
}

struct OpSpec {
  const char* name;
  std::vector<const char*> inputs;
  std::vector<const char*> outputs;
  std::vector<const char*> attrs;
  void (*shapes)(TF_ShapeInferenceContext*, TF_Status*);
  void (*compute)(void*, TF_OpKernelContext*);
};

void Register(const OpSpec& spec) {
  TF_OpDefinitionBuilder* op = TF_NewOpDefinitionBuilder(spec.name);
  for (const char* input : spec.inputs)
    TF_OpDefinitionBuilderAddInput(op, input);
  for (const char* output : spec.outputs) {
    TF_OpDefinitionBuilderAddOutput(op, output);
  }
  for (const char* attr : spec.attrs) TF_OpDefinitionBuilderAddAttr(op, attr);
  TF_OpDefinitionBuilderSetIsStateful(op, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(op, spec.shapes);
  Status status;
  TF_RegisterOpDefinition(op, status.s);
  if (!status.ok()) return;
  TF_KernelBuilder* builder = TF_NewKernelBuilder(
      spec.name, "CPU", &CreateKernel, spec.compute, &DeleteKernel);
  TF_RegisterKernelBuilder(spec.name, builder, status.s);
}

void RegisterOps() {
  Register(
      {kSampleOp,
       {"server_address: string", "table: string"},
       {"key: uint64", "probability: double", "table_size: int64",
        "priority: double", "times_sampled: int32", "outputs: Toutput_list"},
       {"Toutput_list: list(type) >= 0"},
       &SampleShapes,
       &ComputeSample});
  Register({kInsertOp,
            {"server_address: string", "data: T", "tables: string",
             "priorities: double"},
            {},
            {"T: list(type) >= 0"},
            &InsertShapes,
            &ComputeInsert});
  Register({kUpdateOp,
            {"server_address: string", "table: string", "keys: uint64",
             "priorities: double"},
            {},
            {},
            &UpdateShapes,
            &ComputeUpdate});
}

// tf.load_op_library runs this while it loads the library.
const bool registered = (RegisterOps(), true);

}  // namespace
}  // namespace deepmind::reverb::tf_ops
