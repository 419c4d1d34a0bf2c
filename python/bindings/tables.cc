#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cc/core/chunk.h"
#include "cc/core/table.h"
#include "cc/core/table_item.h"
#include "cc/rate_limiters/rate_limiter.h"
#include "cc/selectors/from_options.h"
#include "cc/selectors/interface.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {
namespace {

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
    chunks.append(py::bytes(chunk->Serialize()));
  }
  return py::make_tuple(py::bytes(info.SerializeAsString()), chunks);
}

}  // namespace

void BindTables(py::module_& m) {
  py::class_<TableExtension, std::shared_ptr<TableExtension>>(m,
                                                              "TableExtension");

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
            RunWithoutGil([&] {
              return self.InsertOrAssign(std::move(table_item),
                                         TimeoutFromMs(timeout_ms));
            });
          },
          py::arg("item"), py::arg("chunks"),
          py::arg("timeout_ms") = py::none())
      .def(
          "sample",
          [](Table& self, int32_t batch_size,
             std::optional<int64_t> timeout_ms) {
            const std::vector<SampledItem> samples = RunWithoutGil([&] {
              return self.SampleFlexibleBatch(batch_size,
                                              TimeoutFromMs(timeout_ms));
            });
            py::list result;
            for (const auto& sample : samples) {
              result.append(SampledItemToPython(sample));
            }
            return result;
          },
          py::arg("batch_size") = 1, py::arg("timeout_ms") = py::none())
      .def(
          "mutate_items",
          [](Table& self,
             const std::vector<std::pair<uint64_t, double>>& updates,
             const std::vector<uint64_t>& deletes) {
            const PriorityArrays arrays = PriorityUpdates(updates);
            RunWithoutGil([&] {
              return self.MutateItems(arrays.keys, arrays.priorities, deletes);
            });
          },
          py::arg("updates"), py::arg("deletes"))
      .def("reset", &Table::Reset, py::call_guard<py::gil_scoped_release>())
      .def("close", &Table::Close, py::call_guard<py::gil_scoped_release>())
      .def("__repr__", &Table::DebugString);
}

}  // namespace deepmind::reverb
