// Helpers for kernels written against TensorFlow's C kernel API only
// (sample_op.cc, client_ops.cc): a TF_Status owner, attribute and input
// readers. Includes TensorFlow's C headers and the standard library, nothing
// else (see sample_source.h for why).
#ifndef REVERB_TF_OPS_KERNEL_SUPPORT_H_
#define REVERB_TF_OPS_KERNEL_SUPPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"
#include "tensorflow/c/tf_tstring.h"

namespace deepmind::reverb::tf_ops {

// Owns a TF_Status.
struct Status {
  TF_Status* s = TF_NewStatus();
  Status() = default;
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  ~Status() { TF_DeleteStatus(s); }
  bool ok() const { return TF_GetCode(s) == TF_OK; }
};

// Owns the TF_Tensor of an input.
struct Input {
  TF_Tensor* t = nullptr;
  Input() = default;
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  Input(Input&& other) noexcept : t(other.t) { other.t = nullptr; }
  ~Input() {
    if (t != nullptr) TF_DeleteTensor(t);
  }
};

inline bool GetInt64List(TF_OpKernelConstruction* ctx, const char* name,
                         std::vector<int64_t>* out, TF_Status* status) {
  int32_t list_size = 0;
  int32_t total_size = 0;
  TF_OpKernelConstruction_GetAttrSize(ctx, name, &list_size, &total_size,
                                      status);
  if (TF_GetCode(status) != TF_OK) return false;
  out->resize(list_size);
  TF_OpKernelConstruction_GetAttrInt64List(ctx, name, out->data(), list_size,
                                           status);
  return TF_GetCode(status) == TF_OK;
}

// Input `index`; false (with `status` set) if TensorFlow has none.
inline bool GetInput(TF_OpKernelContext* ctx, int index, Input* input,
                     TF_Status* status) {
  TF_GetInput(ctx, index, &input->t, status);
  return TF_GetCode(status) == TF_OK;
}

// The shape of a tensor, as "[2,3]".
inline std::string ShapeText(const TF_Tensor* tensor) {
  std::string text = "[";
  for (int d = 0; d < TF_NumDims(tensor); ++d) {
    if (d > 0) text += ",";
    text += std::to_string(TF_Dim(tensor, d));
  }
  return text + "]";
}

// Element `i` of a string tensor.
inline std::string StringAt(const TF_Tensor* tensor, int64_t i) {
  const auto* value = static_cast<const TF_TString*>(TF_TensorData(tensor)) + i;
  return std::string(TF_TString_GetDataPointer(value),
                     TF_TString_GetSize(value));
}

// The string held by input `index`, a string tensor of one element (a
// scalar, or a vector of one); false (with `status` set) otherwise.
inline bool GetStringInput(TF_OpKernelContext* ctx, int index, const char* name,
                           std::string* out, TF_Status* status) {
  Input input;
  if (!GetInput(ctx, index, &input, status)) return false;
  if (TF_TensorType(input.t) != TF_STRING ||
      TF_TensorElementCount(input.t) != 1) {
    const std::string message = std::string("`") + name +
                                "` must be one string, got a tensor of shape " +
                                ShapeText(input.t) + ".";
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message.c_str());
    return false;
  }
  *out = StringAt(input.t, 0);
  return true;
}

// The strings held by input `index`, a string scalar (one string) or a
// vector of at least one; false (with `status` set) otherwise.
inline bool GetStringsInput(TF_OpKernelContext* ctx, int index,
                            const char* name, std::vector<std::string>* out,
                            TF_Status* status) {
  Input input;
  if (!GetInput(ctx, index, &input, status)) return false;
  if (TF_TensorType(input.t) != TF_STRING || TF_NumDims(input.t) > 1 ||
      TF_TensorElementCount(input.t) == 0) {
    const std::string message =
        std::string("`") + name +
        "` must be a string or a vector of strings, got a tensor of shape " +
        ShapeText(input.t) + ".";
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message.c_str());
    return false;
  }
  out->clear();
  for (int64_t i = 0; i < TF_TensorElementCount(input.t); ++i) {
    out->push_back(StringAt(input.t, i));
  }
  return true;
}

// Fails the kernel's run with `code` and `message`.
inline void Fail(TF_OpKernelContext* ctx, int code,
                 const std::string& message) {
  Status status;
  TF_SetStatus(status.s, static_cast<TF_Code>(code), message.c_str());
  TF_OpKernelContext_Failure(ctx, status.s);
}

}  // namespace deepmind::reverb::tf_ops

#endif  // REVERB_TF_OPS_KERNEL_SUPPORT_H_
