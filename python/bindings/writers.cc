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
#include <pybind11/numpy.h>
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
#include "cc/checkpointing/checkpointer.h"
#include "cc/client/chunker.h"
#include "cc/client/client.h"
#include "cc/client/sampler.h"
#include "cc/service/server.h"
#include "cc/core/table.h"
#include "cc/client/trajectory_writer.h"
#include "cc/client/legacy_writer.h"
#include "python/bindings/numpy_conversion.h"

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
    default:  // The message alone, as dm-reverb.
      throw std::runtime_error(message);
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

// Runs `fn` (returning absl::Status) without the GIL; raises its error.
template <typename Fn>
void RunWithoutGil(Fn&& fn) {
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = fn();
  }
  MaybeRaise(status);
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
    chunks.append(py::bytes(std::string(chunk->wire())));
  }
  return py::make_tuple(py::bytes(info.SerializeAsString()), chunks);
}

std::vector<Tensor> TensorsFromPython(const py::list& arrays) {
  std::vector<Tensor> tensors;
  tensors.reserve(arrays.size());
  for (const auto& array : arrays) {
    tensors.push_back(ValueOrRaise(TensorFromNumpy(array)));
  }
  return tensors;
}

// A sample as ((key, probability, table_size, priority, times_sampled) as
// Python numbers, [column arrays], timesteps) where timesteps is -1 if the
// columns cannot be split into timesteps.
py::tuple SampleToPython(Sample sample) {
  const PrioritizedItem& item = sample.info->item();
  py::tuple info = py::make_tuple(
      py::int_(item.key()), py::float_(sample.info->probability()),
      py::int_(sample.info->table_size()), py::float_(item.priority()),
      py::int_(item.times_sampled()));
  auto timesteps = NumTimesteps(sample);
  py::list columns;
  for (Tensor& column : sample.columns) {
    columns.append(TensorToNumpy(std::move(column)));
  }
  return py::make_tuple(info, columns, timesteps.ok() ? *timesteps : -1);
}

// Python's handle on a cell: it does not keep the cell alive.
struct WeakCellRef {
  std::weak_ptr<CellRef> ref;

  // RuntimeError (dm-reverb's message) once the cell has expired.
  std::shared_ptr<CellRef> Lock() const {
    auto locked = ref.lock();
    if (locked == nullptr) {
      throw std::runtime_error("Cannot access data from expired WeakCellRef");
    }
    return locked;
  }
};

// A trajectory as TrajectoryWriter.CreateItem takes it: per column, a
// sequence of WeakCellRefs and a squeeze flag.
std::vector<TrajectoryColumn> TrajectoryFromPython(
    const py::sequence& trajectory, const py::sequence& squeeze) {
  const size_t num_columns = trajectory.size();
  if (squeeze.size() != num_columns) {
    throw py::value_error("CreateItem needs one squeeze flag per column.");
  }
  std::vector<TrajectoryColumn> columns(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    const py::sequence cells = trajectory[c];
    columns[c].refs.reserve(cells.size());
    for (py::handle cell : cells) {
      columns[c].refs.push_back(cell.cast<const WeakCellRef&>().ref);
    }
    columns[c].squeeze = squeeze[c].cast<bool>();
  }
  return columns;
}

// The arrays of a step or batch (None for absent columns), viewed.
struct OptionalViews {
  explicit OptionalViews(const py::list& arrays) {
    arrays_.reserve(arrays.size());
    views.reserve(arrays.size());
    for (const auto& array : arrays) {
      if (array.is_none()) {
        views.emplace_back();
        continue;
      }
      arrays_.push_back(ValueOrRaise(NumpyView::Of(array)));
      views.emplace_back(arrays_.back().view());
    }
  }

  std::vector<std::optional<TensorView>> views;

 private:
  std::vector<NumpyView> arrays_;  // Reserved: never reallocated.
};

py::list RefsToPython(
    const std::vector<std::optional<std::weak_ptr<CellRef>>>& refs) {
  py::list result;
  for (const auto& ref : refs) {
    if (ref.has_value()) {
      result.append(py::cast(WeakCellRef{*ref}));
    } else {
      result.append(py::none());
    }
  }
  return result;
}

// TrajectoryWriter::Append or AppendPartial of a list of optional arrays;
// the refs of the present cells.
py::list AppendStep(TrajectoryWriter& writer, const py::list& step,
                    bool partial) {
  OptionalViews cells(step);
  absl::StatusOr<std::vector<std::optional<std::weak_ptr<CellRef>>>> refs;
  {
    py::gil_scoped_release release;
    refs = partial ? writer.AppendPartial(cells.views)
                   : writer.Append(cells.views);
  }
  return RefsToPython(ValueOrRaise(std::move(refs)));
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

  // --- Checkpointer ----------------------------------------------------------------
  py::class_<Checkpointer, std::shared_ptr<Checkpointer>>(m, "Checkpointer")
      .def(py::init([](const std::string& root_dir, const std::string& group,
                       std::optional<std::string> fallback_checkpoint_path,
                       int keep_latest, int zlib_level,
                       bool use_checkpoint_table_options) {
             CheckpointerOptions options;
             options.keep_latest = keep_latest;
             options.zlib_level = zlib_level;
             options.use_checkpoint_table_options = use_checkpoint_table_options;
             return std::make_shared<Checkpointer>(
                 root_dir, group, std::move(fallback_checkpoint_path), options);
           }),
           py::arg("root_dir"), py::arg("group") = "",
           py::arg("fallback_checkpoint_path") = py::none(),
           py::arg("keep_latest") = 1, py::arg("zlib_level") = 0,
           py::arg("use_checkpoint_table_options") = true)
      .def("save",
           [](Checkpointer& self,
              const std::vector<std::shared_ptr<Table>>& tables,
              int keep_latest) {
             absl::StatusOr<std::string> path;
             {
               py::gil_scoped_release release;
               path = self.Save(tables, keep_latest);
             }
             return ValueOrRaise(std::move(path));
           },
           py::arg("tables"), py::arg("keep_latest") = 0)
      .def("load",
           [](const Checkpointer& self, const std::string& path,
              const std::vector<std::shared_ptr<Table>>& tables) {
             RunWithoutGil([&] { return self.Load(path, tables); });
           },
           py::arg("path"), py::arg("tables"))
      .def_property_readonly("root_dir", &Checkpointer::root_dir)
      .def("__repr__", &Checkpointer::DebugString);
  m.def(
      "create_default_checkpointer",
      [](const std::string& name, const std::string& group,
         std::optional<std::string> fallback_checkpoint_path) {
        return std::make_shared<Checkpointer>(name, group,
                                              std::move(fallback_checkpoint_path));
      },
      py::arg("name"), py::arg("group") = "",
      py::arg("fallback_checkpoint_path") = py::none());

  // --- Server ------------------------------------------------------------------------
  py::class_<Server, std::shared_ptr<Server>>(m, "Server")
      .def(py::init([](const std::vector<std::shared_ptr<Table>>& tables,
                       int port, std::shared_ptr<Checkpointer> checkpointer,
                       const std::string& bind_address,
                       std::optional<double> checkpoint_every_seconds) {
             absl::StatusOr<std::unique_ptr<Server>> server;
             {
               py::gil_scoped_release release;
               server = Server::Start(
                   tables, port, bind_address, std::move(checkpointer),
                   checkpoint_every_seconds.has_value()
                       ? absl::Seconds(*checkpoint_every_seconds)
                       : absl::InfiniteDuration());
             }
             return std::shared_ptr<Server>(ValueOrRaise(std::move(server)));
           }),
           py::arg("priority_tables"), py::arg("port"),
           py::arg("checkpointer") = nullptr,
           py::arg("bind_address") = "localhost",
           py::arg("checkpoint_every_seconds") = py::none())
      .def_property_readonly("port", &Server::port)
      .def("Stop", &Server::Stop, py::call_guard<py::gil_scoped_release>())
      // True once stopped; false if `timeout_ms` (None: forever) passed.
      .def(
          "Wait",
          [](Server& self, std::optional<int64_t> timeout_ms) {
            py::gil_scoped_release release;
            return self.Wait(TimeoutFromMs(timeout_ms));
          },
          py::arg("timeout_ms") = py::none());

  // --- Client ------------------------------------------------------------------------
  py::class_<Writer>(m, "Writer")
      .def("Append",
           [](Writer& self, const py::list& step) {
             std::vector<Tensor> tensors = TensorsFromPython(step);
             RunWithoutGil([&] { return self.Append(std::move(tensors)); });
           })
      .def("AppendSequence",
           [](Writer& self, const py::list& sequence) {
             std::vector<Tensor> tensors = TensorsFromPython(sequence);
             RunWithoutGil(
                 [&] { return self.AppendSequence(std::move(tensors)); });
           })
      .def(
          "CreateItem",
          [](Writer& self, const std::string& table, int num_timesteps,
             double priority) {
            RunWithoutGil([&] {
              return self.CreateItem(table, num_timesteps, priority);
            });
          },
          py::arg("table"), py::arg("num_timesteps"), py::arg("priority"))
      .def("NewEpisode",
           [](Writer& self) {
             RunWithoutGil([&] { return self.NewEpisode(); });
           })
      .def(
          "Flush",
          [](Writer& self, std::optional<int64_t> timeout_ms) {
            RunWithoutGil([&] { return self.Flush(TimeoutFromMs(timeout_ms)); });
          },
          py::arg("timeout_ms") = py::none())
      .def(
          "Close",
          [](Writer& self, std::optional<int64_t> timeout_ms) {
            RunWithoutGil([&] { return self.Close(TimeoutFromMs(timeout_ms)); });
          },
          py::arg("timeout_ms") = py::none())
      .def("__repr__", &Writer::DebugString);

  py::class_<Sampler>(m, "Sampler")
      .def_property_readonly_static(
          "NUM_INFO_TENSORS",
          [](py::object) { return Sampler::kNumInfoTensors; })
      .def(
          "GetNextTrajectory",
          [](Sampler& self, std::optional<int64_t> timeout_ms) {
            absl::StatusOr<Sample> sample;
            {
              py::gil_scoped_release release;
              sample = self.GetNextSample(TimeoutFromMs(timeout_ms));
            }
            if (absl::IsOutOfRange(sample.status())) throw py::stop_iteration();
            return SampleToPython(ValueOrRaise(std::move(sample)));
          },
          py::arg("timeout_ms") = py::none())
      // ((keys, probabilities, table_sizes, priorities, times_sampled) as
      // arrays [B], [columns stacked to [B, ...]]); StopIteration once the
      // sampler has returned all its samples.
      .def(
          "GetNextBatch",
          [](Sampler& self, int batch_size, std::optional<int64_t> timeout_ms,
             std::optional<int64_t> fill_timeout_ms) {
            absl::StatusOr<std::vector<Sample>> batch;
            std::vector<Tensor> columns;
            absl::Status stacked;
            {
              py::gil_scoped_release release;
              batch = self.GetNextBatch(batch_size, TimeoutFromMs(timeout_ms),
                                        TimeoutFromMs(fill_timeout_ms));
              if (batch.ok()) {
                const size_t num_columns = (*batch)[0].columns.size();
                for (size_t c = 0; c < num_columns && stacked.ok(); ++c) {
                  std::vector<Tensor> cells;
                  cells.reserve(batch->size());
                  for (Sample& sample : *batch) {
                    if (sample.columns.size() != num_columns) {
                      stacked = absl::InvalidArgumentError(
                          "Samples of a batch have different numbers of "
                          "columns.");
                      break;
                    }
                    cells.push_back(std::move(sample.columns[c]));
                  }
                  auto column = StackTensors(std::move(cells));
                  if (!column.ok()) {
                    stacked = absl::InvalidArgumentError(absl::StrCat(
                        "Cannot batch column ", c, " (use batch_size=1 for "
                        "trajectories of different lengths): ",
                        column.status().message()));
                  } else {
                    columns.push_back(*std::move(column));
                  }
                }
              }
            }
            if (absl::IsOutOfRange(batch.status())) throw py::stop_iteration();
            const std::vector<Sample>& samples = ValueOrRaise(std::move(batch));
            MaybeRaise(stacked);
            const ssize_t n = static_cast<ssize_t>(samples.size());
            py::array_t<uint64_t> keys(n);
            py::array_t<double> probabilities(n);
            py::array_t<int64_t> table_sizes(n);
            py::array_t<double> priorities(n);
            py::array_t<int32_t> times_sampled(n);
            for (ssize_t i = 0; i < n; ++i) {
              const SampleInfo& info = *samples[i].info;
              keys.mutable_at(i) = info.item().key();
              probabilities.mutable_at(i) = info.probability();
              table_sizes.mutable_at(i) = info.table_size();
              priorities.mutable_at(i) = info.item().priority();
              times_sampled.mutable_at(i) = info.item().times_sampled();
            }
            py::list arrays;
            for (Tensor& column : columns) {
              arrays.append(TensorToNumpy(std::move(column)));
            }
            return py::make_tuple(
                py::make_tuple(keys, probabilities, table_sizes, priorities,
                               times_sampled),
                arrays);
          },
          py::arg("batch_size"), py::arg("timeout_ms") = py::none(),
          py::arg("fill_timeout_ms") = py::none())
      .def("Close", &Sampler::Close, py::call_guard<py::gil_scoped_release>());

  // --- Trajectory writer --------------------------------------------------------
  py::class_<ChunkerOptions, std::shared_ptr<ChunkerOptions>>(m, "ChunkerOptions")
      .def("__eq__",
           [](const ChunkerOptions& self, const ChunkerOptions& other) {
             auto* a = dynamic_cast<const AutoTunedChunkerOptions*>(&self);
             auto* b = dynamic_cast<const AutoTunedChunkerOptions*>(&other);
             if ((a == nullptr) != (b == nullptr)) return false;
             if (a != nullptr && a->throughput_weight() != b->throughput_weight()) {
               return false;
             }
             return (a != nullptr ||
                     self.GetMaxChunkLength() == other.GetMaxChunkLength()) &&
                    self.GetNumKeepAliveRefs() == other.GetNumKeepAliveRefs() &&
                    self.GetDeltaEncode() == other.GetDeltaEncode();
           })
      .def_property_readonly("max_chunk_length",
                             &ChunkerOptions::GetMaxChunkLength)
      .def_property_readonly("num_keep_alive_refs",
                             &ChunkerOptions::GetNumKeepAliveRefs);
  py::class_<ConstantChunkerOptions, ChunkerOptions,
             std::shared_ptr<ConstantChunkerOptions>>(m, "ConstantChunkerOptions")
      .def(py::init<int, int, bool>(), py::arg("max_chunk_length"),
           py::arg("num_keep_alive_refs"), py::arg("delta_encode") = false);
  py::class_<AutoTunedChunkerOptions, ChunkerOptions,
             std::shared_ptr<AutoTunedChunkerOptions>>(m, "AutoTunedChunkerOptions")
      .def(py::init<int, double, bool>(), py::arg("num_keep_alive_refs"),
           py::arg("throughput_weight") = 1.0, py::arg("delta_encode") = false);

  py::class_<WeakCellRef>(m, "WeakCellRef")
      .def_property_readonly(
          "expired", [](const WeakCellRef& self) { return self.ref.expired(); })
      .def("numpy",
           [](const WeakCellRef& self) {
             std::shared_ptr<CellRef> ref = self.Lock();
             absl::StatusOr<Tensor> data;
             {
               py::gil_scoped_release release;
               data = ref->GetData();
             }
             return TensorToNumpy(ValueOrRaise(std::move(data)));
           })
      .def_property_readonly(
          "shape",
          [](const WeakCellRef& self) {
            const auto& shape = self.Lock()->shape();
            return std::vector<std::optional<int64_t>>(shape.begin(),
                                                       shape.end());
          })
      .def_property_readonly("dtype", [](const WeakCellRef& self) {
        return NumpyDtype(self.Lock()->dtype());
      });

  py::class_<TrajectoryWriter>(m, "TrajectoryWriter")
      .def("Append",
           [](TrajectoryWriter& self, const py::list& step) {
             return AppendStep(self, step, /*partial=*/false);
           })
      .def("AppendPartial",
           [](TrajectoryWriter& self, const py::list& step) {
             return AppendStep(self, step, /*partial=*/true);
           })
      .def("AppendBatch",
           [](TrajectoryWriter& self, const py::list& columns) {
             OptionalViews batch(columns);
             absl::StatusOr<std::vector<
                 std::optional<std::vector<std::weak_ptr<CellRef>>>>>
                 refs;
             {
               py::gil_scoped_release release;
               refs = self.AppendBatch(batch.views);
             }
             py::list result;
             for (const auto& column : ValueOrRaise(std::move(refs))) {
               if (!column.has_value()) {
                 result.append(py::none());
                 continue;
               }
               py::list cells;
               for (const auto& ref : *column) {
                 cells.append(py::cast(WeakCellRef{ref}));
               }
               result.append(cells);
             }
             return result;
           })
      .def(
          "CreateItem",
          // Reads the refs straight from the Python sequences (one item per
          // step is common: this is on the per-step path).
          [](TrajectoryWriter& self, const std::string& table, double priority,
             const py::sequence& trajectory, const py::sequence& squeeze) {
            std::vector<TrajectoryColumn> columns =
                TrajectoryFromPython(trajectory, squeeze);
            RunWithoutGil(
                [&] { return self.CreateItem(table, priority, columns); });
          },
          py::arg("table"), py::arg("priority"), py::arg("trajectory"),
          py::arg("squeeze_column"))
      .def(
          "CheckTrajectory",
          [](TrajectoryWriter& self, const py::sequence& trajectory,
             const py::sequence& squeeze) {
            std::vector<TrajectoryColumn> columns =
                TrajectoryFromPython(trajectory, squeeze);
            RunWithoutGil([&] { return self.CheckTrajectory(columns); });
          },
          py::arg("trajectory"), py::arg("squeeze_column"))
      .def(
          "Flush",
          // As dm-reverb's: a timeout <= 0 (or None) waits forever.
          [](TrajectoryWriter& self, int ignore_last_num_items,
             std::optional<int64_t> timeout_ms) {
            const absl::Duration timeout =
                timeout_ms.has_value() && *timeout_ms > 0
                    ? absl::Milliseconds(*timeout_ms)
                    : absl::InfiniteDuration();
            RunWithoutGil(
                [&] { return self.Flush(ignore_last_num_items, timeout); });
          },
          py::arg("ignore_last_num_items") = 0,
          py::arg("timeout_ms") = py::none())
      .def(
          "EndEpisode",
          // As dm-reverb's: None waits forever, a timeout <= 0 not at all.
          [](TrajectoryWriter& self, bool clear_buffers,
             std::optional<int64_t> timeout_ms) {
            const absl::Duration timeout =
                timeout_ms.has_value() ? absl::Milliseconds(*timeout_ms)
                                       : absl::InfiniteDuration();
            RunWithoutGil(
                [&] { return self.EndEpisode(clear_buffers, timeout); });
          },
          py::arg("clear_buffers"), py::arg("timeout_ms") = py::none())
      .def("Close", &TrajectoryWriter::Close,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "ConfigureChunker",
          [](TrajectoryWriter& self, int column,
             const std::shared_ptr<ChunkerOptions>& options) {
            RunWithoutGil(
                [&] { return self.ConfigureChunker(column, options->Clone()); });
          },
          py::arg("column"), py::arg("options"))
      .def_property_readonly("max_num_keep_alive_refs",
                             &TrajectoryWriter::max_num_keep_alive_refs)
      .def_property_readonly("episode_steps", &TrajectoryWriter::episode_steps)
      .def_property_readonly("num_pending_items",
                             &TrajectoryWriter::num_pending_items)
      .def_property_readonly("num_streamed_chunks",
                             &TrajectoryWriter::num_streamed_chunks);

  py::class_<SampleStream>(m, "SampleStream")
      .def(
          "Request",
          [](SampleStream& self, int64_t n, std::optional<int64_t> timeout_ms) {
            RunWithoutGil(
                [&] { return self.Request(n, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("num_samples"), py::arg("rate_limiter_timeout_ms") = py::none())
      .def("Read",
           [](SampleStream& self) {
             absl::StatusOr<Sample> sample;
             {
               py::gil_scoped_release release;
               sample = self.Read();
             }
             return SampleToPython(ValueOrRaise(std::move(sample)));
           })
      .def_property_readonly("outstanding", &SampleStream::outstanding)
      .def_property_readonly("ok", &SampleStream::ok)
      .def("Cancel", &SampleStream::Cancel,
           py::call_guard<py::gil_scoped_release>())
      .def("Close", [](SampleStream& self) {
        RunWithoutGil([&] { return self.Close(); });
      });

  py::class_<Client>(m, "Client")
      .def(py::init<std::string>(), py::arg("server_address"))
      .def(
          "NewWriter",
          [](Client& self, int chunk_length, int max_timesteps,
             bool delta_encoded, int max_in_flight_items) {
            WriterOptions options;
            options.chunk_length = chunk_length;
            options.max_timesteps = max_timesteps;
            options.delta_encoded = delta_encoded;
            options.max_in_flight_items = max_in_flight_items;
            return ValueOrRaise(self.NewWriter(options));
          },
          py::arg("chunk_length"), py::arg("max_timesteps"),
          py::arg("delta_encoded") = false,
          py::arg("max_in_flight_items") = 25)
      .def(
          "NewSampler",
          [](Client& self, const std::string& table, int64_t max_samples,
             int64_t max_in_flight_samples_per_worker, int num_workers,
             int64_t max_samples_per_stream,
             std::optional<int64_t> rate_limiter_timeout_ms) {
            SamplerOptions options;
            options.max_samples = max_samples;
            options.max_in_flight_samples_per_worker =
                max_in_flight_samples_per_worker;
            options.num_workers = num_workers;
            options.max_samples_per_stream = max_samples_per_stream;
            options.rate_limiter_timeout = TimeoutFromMs(rate_limiter_timeout_ms);
            return ValueOrRaise(self.NewSampler(table, options));
          },
          py::arg("table"), py::arg("max_samples"),
          py::arg("max_in_flight_samples_per_worker") = 100,
          py::arg("num_workers") = 1,
          py::arg("max_samples_per_stream") = 10000,
          py::arg("rate_limiter_timeout_ms") = py::none())
      .def(
          "NewTrajectoryWriter",
          [](Client& self, const std::shared_ptr<ChunkerOptions>& options) {
            return ValueOrRaise(self.NewTrajectoryWriter(options->Clone()));
          },
          py::arg("chunker_options"))
      .def(
          "NewSampleStream",
          [](Client& self, const std::string& table) {
            absl::StatusOr<std::unique_ptr<SampleStream>> stream;
            {
              py::gil_scoped_release release;
              stream = self.NewSampleStream(table, kConnectTimeout);
            }
            return ValueOrRaise(std::move(stream));
          },
          py::arg("table"))
      .def(
          "MutatePriorities",
          [](Client& self, const std::string& table,
             const std::vector<std::pair<uint64_t, double>>& updates,
             const std::vector<uint64_t>& deletes,
             std::optional<int64_t> timeout_ms) {
            std::vector<KeyWithPriority> protos(updates.size());
            for (size_t i = 0; i < updates.size(); ++i) {
              protos[i].set_key(updates[i].first);
              protos[i].set_priority(updates[i].second);
            }
            RunWithoutGil([&] {
              return self.MutatePriorities(table, protos, deletes,
                                           TimeoutFromMs(timeout_ms));
            });
          },
          py::arg("table"), py::arg("updates"), py::arg("deletes"),
          py::arg("timeout_ms") = py::none())
      .def(
          "Reset",
          [](Client& self, const std::string& table,
             std::optional<int64_t> timeout_ms) {
            RunWithoutGil(
                [&] { return self.Reset(table, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("table"), py::arg("timeout_ms") = py::none())
      // (tables_state_id as a 128-bit int, [serialized TableInfo]).
      .def(
          "ServerInfo",
          [](Client& self, std::optional<int64_t> timeout_ms) {
            absl::StatusOr<ServerInfoResponse> response;
            {
              py::gil_scoped_release release;
              response = self.ServerInfo(TimeoutFromMs(timeout_ms));
            }
            ServerInfoResponse info = ValueOrRaise(std::move(response));
            py::list tables;
            for (const auto& table : info.table_info()) {
              tables.append(py::bytes(table.SerializeAsString()));
            }
            py::int_ high(info.tables_state_id().high());
            py::int_ low(info.tables_state_id().low());
            py::object state_id = (high.attr("__lshift__")(64)).attr("__or__")(low);
            return py::make_tuple(state_id, tables);
          },
          py::arg("timeout_ms") = py::none())
      .def(
          "Checkpoint",
          [](Client& self, std::optional<int64_t> timeout_ms) {
            absl::StatusOr<std::string> path;
            {
              py::gil_scoped_release release;
              path = self.Checkpoint(TimeoutFromMs(timeout_ms));
            }
            return ValueOrRaise(std::move(path));
          },
          py::arg("timeout_ms") = py::none());
}
