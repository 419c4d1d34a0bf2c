#include "cc/tensor/signature.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace deepmind::reverb {
namespace {

std::string Join(const std::string& path, const std::string& part) {
  if (part.empty()) return path;
  return path.empty() ? part : absl::StrCat(path, "/", part);
}

SpecShape FromProto(const tensorflow::TensorShapeProto& proto) {
  if (proto.unknown_rank()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& dim : proto.dim())
    dims.push_back(dim.size() < 0 ? -1 : dim.size());
  return dims;
}

absl::Status Flatten(const tensorflow::StructuredValue& value,
                     const std::string& path,
                     std::vector<SignatureSpec>* specs) {
  switch (value.kind_case()) {
    case tensorflow::StructuredValue::kTensorSpecValue: {
      const auto& spec = value.tensor_spec_value();
      specs->push_back(
          {Join(path, spec.name()), spec.dtype(), FromProto(spec.shape())});
      return absl::OkStatus();
    }
    case tensorflow::StructuredValue::kBoundedTensorSpecValue: {
      const auto& spec = value.bounded_tensor_spec_value();
      specs->push_back(
          {Join(path, spec.name()), spec.dtype(), FromProto(spec.shape())});
      return absl::OkStatus();
    }
    case tensorflow::StructuredValue::kListValue:
    case tensorflow::StructuredValue::kTupleValue: {
      const auto& values = value.has_list_value()
                               ? value.list_value().values()
                               : value.tuple_value().values();
      for (int i = 0; i < values.size(); ++i) {
        absl::Status status =
            Flatten(values[i], Join(path, absl::StrCat(i)), specs);
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    }
    case tensorflow::StructuredValue::kDictValue: {
      std::vector<std::string> keys;
      for (const auto& [key, unused] : value.dict_value().fields()) {
        keys.push_back(key);
      }
      std::sort(keys.begin(), keys.end());
      for (const std::string& key : keys) {
        absl::Status status = Flatten(value.dict_value().fields().at(key),
                                      Join(path, key), specs);
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    }
    case tensorflow::StructuredValue::kNamedTupleValue:
      for (const auto& pair : value.named_tuple_value().values()) {
        absl::Status status =
            Flatten(pair.value(), Join(path, pair.key()), specs);
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "The signature holds something other than a tensor spec at '", path,
          "'."));
  }
}

}  // namespace

absl::StatusOr<std::vector<SignatureSpec>> FlattenSignature(
    const tensorflow::StructuredValue& signature) {
  std::vector<SignatureSpec> specs;
  absl::Status status = Flatten(signature, "", &specs);
  if (!status.ok()) return status;
  return specs;
}

bool ShapesCompatible(const SpecShape& a, const SpecShape& b) {
  if (!a.has_value() || !b.has_value()) return true;
  if (a->size() != b->size()) return false;
  for (size_t i = 0; i < a->size(); ++i) {
    if ((*a)[i] >= 0 && (*b)[i] >= 0 && (*a)[i] != (*b)[i]) return false;
  }
  return true;
}

std::string DataTypeName(tensorflow::DataType dtype) {
  // DT_FLOAT -> float, DT_INT64 -> int64, DT_STRING -> string, ...
  const std::string& name = tensorflow::DataType_Name(dtype);
  // A value this build's enum lacks (a signature may carry any), spelled
  // as TensorFlow spells it.
  if (name.empty()) return absl::StrCat("unknown dtype enum (", dtype, ")");
  return absl::AsciiStrToLower(absl::StripPrefix(name, "DT_"));
}

std::string ShapeString(const SpecShape& shape) {
  if (!shape.has_value()) return "<unknown>";
  return absl::StrCat("[",
                      absl::StrJoin(*shape, ",",
                                    [](std::string* out, int64_t d) {
                                      absl::StrAppend(
                                          out, d < 0 ? "?" : absl::StrCat(d));
                                    }),
                      "]");
}

std::string DescribeSignature(const std::vector<SignatureSpec>& specs) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < specs.size(); ++i) {
    parts.push_back(absl::StrCat(i, ": Tensor<name: '", specs[i].name,
                                 "', dtype: ", DataTypeName(specs[i].dtype),
                                 ", shape: ", ShapeString(specs[i].shape),
                                 ">"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace deepmind::reverb
