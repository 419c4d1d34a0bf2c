// reverb.pybind: the Python face of libreverb.
//
// Thin by design: argument conversion, status -> exception mapping and GIL
// release around every call that can block or take a table lock. Validation
// and semantics live in C++; user-facing docs live in the Python modules.
//
// Status mapping (as dm-reverb): INVALID_ARGUMENT -> ValueError,
// RESOURCE_EXHAUSTED -> IndexError, UNIMPLEMENTED -> NotImplementedError,
// DEADLINE_EXCEEDED -> reverb.errors.DeadlineExceededError, anything else ->
// RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cc/rate_limiters/presets.h"
#include "cc/rate_limiters/rate_limiter.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/from_options.h"
#include "cc/selectors/heap.h"
#include "cc/selectors/interface.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"
#include "cc/table.h"

namespace py = pybind11;

namespace deepmind::reverb {
namespace {

[[noreturn]] void RaiseFromStatus(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      throw py::value_error(message);
    case absl::StatusCode::kResourceExhausted:
      throw py::index_error(message);
    case absl::StatusCode::kUnimplemented:
      PyErr_SetString(PyExc_NotImplementedError, message.c_str());
      throw py::error_already_set();
    case absl::StatusCode::kDeadlineExceeded: {
      py::object error =
          py::module_::import("reverb.errors").attr("DeadlineExceededError");
      PyErr_SetString(error.ptr(), message.c_str());
      throw py::error_already_set();
    }
    default:
      throw std::runtime_error(status.ToString());
  }
}

void MaybeRaise(const absl::Status& status) {
  if (!status.ok()) RaiseFromStatus(status);
}

template <typename T>
T ValueOrRaise(absl::StatusOr<T> status_or) {
  if (!status_or.ok()) RaiseFromStatus(status_or.status());
  return std::move(status_or).value();
}

template <typename Message>
Message ParseOrRaise(const std::string& bytes, const char* what) {
  Message message;
  if (!message.ParseFromString(bytes)) {
    throw py::value_error(absl::StrCat("Could not parse ", what, "."));
  }
  return message;
}

// None or a negative number means "no timeout".
absl::Duration TimeoutFromMs(std::optional<int64_t> timeout_ms) {
  if (!timeout_ms.has_value() || *timeout_ms < 0) {
    return absl::InfiniteDuration();
  }
  return absl::Milliseconds(*timeout_ms);
}

// Placeholder type for upstream's table extensions; none can be built here.
struct TableExtension {};

std::shared_ptr<Table> MakeTable(
    const std::string& name, const std::shared_ptr<ItemSelector>& sampler,
    const std::shared_ptr<ItemSelector>& remover, int64_t max_size,
    int32_t max_times_sampled, const RateLimiter& rate_limiter,
    const std::vector<std::shared_ptr<TableExtension>>& extensions,
    const std::optional<py::bytes>& signature) {
  if (!extensions.empty()) {
    PyErr_SetString(PyExc_NotImplementedError,
                    "Table extensions are not supported.");
    throw py::error_already_set();
  }
  std::optional<tensorflow::StructuredValue> parsed_signature;
  if (signature.has_value()) {
    parsed_signature = ParseOrRaise<tensorflow::StructuredValue>(
        std::string(*signature), "the signature (a StructuredValue)");
  }
  // Each table gets selectors of its own, so one Python selector object can
  // configure several tables.
  return ValueOrRaise(Table::Create(
      name, ValueOrRaise(MakeSelector(sampler->options())),
      ValueOrRaise(MakeSelector(remover->options())), max_size,
      max_times_sampled, rate_limiter, std::move(parsed_signature)));
}

// One sampled item as (serialized SampleInfo, [serialized ChunkData]).
py::tuple SampledItemToPython(const SampledItem& sample) {
  SampleInfo info;
  *info.mutable_item() = sample.ref->item;
  info.mutable_item()->set_priority(sample.priority);
  info.mutable_item()->set_times_sampled(sample.times_sampled);
  info.set_probability(sample.probability);
  info.set_table_size(sample.table_size);
  info.set_rate_limited(sample.rate_limited);
  py::list chunks;
  for (const auto& chunk : sample.ref->chunks) {
    chunks.append(py::bytes(chunk->data().SerializeAsString()));
  }
  return py::make_tuple(py::bytes(info.SerializeAsString()), chunks);
}

}  // namespace
}  // namespace deepmind::reverb

PYBIND11_MODULE(pybind, m) {
  using namespace deepmind::reverb;  // NOLINT
  m.doc() = "Bindings of libreverb (see reverb/pybind.pyi).";

  // --- Selectors ---------------------------------------------------------------
  py::class_<ItemSelector, std::shared_ptr<ItemSelector>>(m, "ItemSelector")
      .def("options",
           [](const ItemSelector& self) {
             return py::bytes(self.options().SerializeAsString());
           })
      .def("__repr__", &ItemSelector::DebugString);
  py::class_<FifoSelector, ItemSelector, std::shared_ptr<FifoSelector>>(
      m, "FifoSelector")
      .def(py::init<>());
  py::class_<LifoSelector, ItemSelector, std::shared_ptr<LifoSelector>>(
      m, "LifoSelector")
      .def(py::init<>());
  py::class_<UniformSelector, ItemSelector, std::shared_ptr<UniformSelector>>(
      m, "UniformSelector")
      .def(py::init<>());
  py::class_<PrioritizedSelector, ItemSelector,
             std::shared_ptr<PrioritizedSelector>>(m, "PrioritizedSelector")
      .def(py::init<double>(), py::arg("priority_exponent"));
  py::class_<HeapSelector, ItemSelector, std::shared_ptr<HeapSelector>>(
      m, "HeapSelector")
      .def(py::init<bool>(), py::arg("min_heap"));
  m.def(
      "selector_from_proto",
      [](const std::string& options) -> std::shared_ptr<ItemSelector> {
        return ValueOrRaise(MakeSelector(ParseOrRaise<KeyDistributionOptions>(
            options, "KeyDistributionOptions")));
      },
      py::arg("options"));

  // --- Rate limiters -------------------------------------------------------------
  py::class_<RateLimiter>(m, "RateLimiter")
      .def(py::init([](double samples_per_insert, int64_t min_size_to_sample,
                       double min_diff, double max_diff) {
             return ValueOrRaise(RateLimiter::Create(
                 samples_per_insert, min_size_to_sample, min_diff, max_diff));
           }),
           py::arg("samples_per_insert"), py::arg("min_size_to_sample"),
           py::arg("min_diff"), py::arg("max_diff"))
      .def_property_readonly("samples_per_insert",
                             &RateLimiter::samples_per_insert)
      .def_property_readonly("min_size_to_sample",
                             &RateLimiter::min_size_to_sample)
      .def_property_readonly("min_diff", &RateLimiter::min_diff)
      .def_property_readonly("max_diff", &RateLimiter::max_diff)
      .def("may_deadlock_without_concurrent_sampling",
           &MayDeadlockWithoutConcurrentSampling)
      .def("__repr__", &RateLimiter::DebugString);
  m.def(
      "min_size_rate_limiter",
      [](int64_t min_size) { return ValueOrRaise(MinSizeRateLimiter(min_size)); },
      py::arg("min_size_to_sample"));
  m.def(
      "sample_to_insert_ratio_rate_limiter",
      [](double spi, int64_t min_size, double min_diff, double max_diff) {
        return ValueOrRaise(
            SampleToInsertRatioRateLimiter(spi, min_size, min_diff, max_diff));
      },
      py::arg("samples_per_insert"), py::arg("min_size_to_sample"),
      py::arg("min_diff"), py::arg("max_diff"));
  m.def(
      "queue_rate_limiter",
      [](int64_t size) { return ValueOrRaise(QueueRateLimiter(size)); },
      py::arg("size"));
  m.def(
      "stack_rate_limiter",
      [](int64_t size) { return ValueOrRaise(StackRateLimiter(size)); },
      py::arg("size"));

  // --- Tables --------------------------------------------------------------------
  py::class_<TableExtension, std::shared_ptr<TableExtension>>(
      m, "TableExtension");

  py::class_<Table, std::shared_ptr<Table>>(m, "Table")
      .def(py::init(&MakeTable), py::arg("name"), py::arg("sampler"),
           py::arg("remover"), py::arg("max_size"),
           py::arg("max_times_sampled"), py::arg("rate_limiter"),
           py::arg("extensions") =
               std::vector<std::shared_ptr<TableExtension>>(),
           py::arg("signature") = std::nullopt)
      .def("name", &Table::name)
      .def("can_sample", &Table::CanSample, py::arg("num_samples"),
           py::call_guard<py::gil_scoped_release>())
      .def("can_insert", &Table::CanInsert, py::arg("num_inserts"),
           py::call_guard<py::gil_scoped_release>())
      .def("size", &Table::size, py::call_guard<py::gil_scoped_release>())
      .def("info",
           [](const Table& self) {
             TableInfo info;
             {
               py::gil_scoped_release release;
               info = self.info();
             }
             return py::bytes(info.SerializeAsString());
           })
      // Low-level access for in-process use and tests: items and chunks as
      // serialized PrioritizedItem / ChunkData protos.
      .def(
          "insert_or_assign",
          [](Table& self, const std::string& item,
             const std::vector<std::string>& chunks,
             std::optional<int64_t> timeout_ms) {
            TableItem table_item;
            table_item.item = ParseOrRaise<PrioritizedItem>(item, "the item");
            for (const auto& chunk : chunks) {
              table_item.chunks.push_back(std::make_shared<Chunk>(
                  ParseOrRaise<ChunkData>(chunk, "a chunk")));
            }
            absl::Status status;
            {
              py::gil_scoped_release release;
              status = self.InsertOrAssign(std::move(table_item),
                                           TimeoutFromMs(timeout_ms));
            }
            MaybeRaise(status);
          },
          py::arg("item"), py::arg("chunks"), py::arg("timeout_ms") = py::none())
      .def(
          "sample",
          [](Table& self, int32_t batch_size,
             std::optional<int64_t> timeout_ms) {
            absl::StatusOr<std::vector<SampledItem>> samples;
            {
              py::gil_scoped_release release;
              samples = self.SampleFlexibleBatch(batch_size,
                                                 TimeoutFromMs(timeout_ms));
            }
            py::list result;
            for (const auto& sample : ValueOrRaise(std::move(samples))) {
              result.append(SampledItemToPython(sample));
            }
            return result;
          },
          py::arg("batch_size") = 1, py::arg("timeout_ms") = py::none())
      .def(
          "mutate_items",
          [](Table& self, const std::vector<std::pair<uint64_t, double>>& updates,
             const std::vector<uint64_t>& deletes) {
            std::vector<KeyWithPriority> protos(updates.size());
            for (size_t i = 0; i < updates.size(); ++i) {
              protos[i].set_key(updates[i].first);
              protos[i].set_priority(updates[i].second);
            }
            absl::Status status;
            {
              py::gil_scoped_release release;
              status = self.MutateItems(protos, deletes);
            }
            MaybeRaise(status);
          },
          py::arg("updates"), py::arg("deletes"))
      .def("reset", &Table::Reset, py::call_guard<py::gil_scoped_release>())
      .def("close", &Table::Close, py::call_guard<py::gil_scoped_release>())
      .def("__repr__", &Table::DebugString);
}
