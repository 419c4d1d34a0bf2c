#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cc/client/chunker.h"
#include "cc/client/legacy_writer.h"
#include "cc/client/trajectory_writer.h"
#include "cc/tensor/tensor.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"
#include "python/bindings/numpy_conversion.h"

namespace py = pybind11;

namespace deepmind::reverb {
namespace {

std::vector<Tensor> TensorsFromPython(const py::list& arrays) {
  std::vector<Tensor> tensors;
  tensors.reserve(arrays.size());
  for (const auto& array : arrays) {
    tensors.push_back(ValueOrRaise(TensorFromNumpy(array)));
  }
  return tensors;
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

// The cells of one column: a sequence of WeakCellRefs.
std::vector<std::weak_ptr<CellRef>> CellRefs(const py::sequence& cells) {
  std::vector<std::weak_ptr<CellRef>> refs;
  refs.reserve(cells.size());
  for (py::handle cell : cells) {
    refs.push_back(cell.cast<const WeakCellRef&>().ref);
  }
  return refs;
}

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
    columns[c].refs = CellRefs(trajectory[c]);
    columns[c].squeeze = squeeze[c].cast<bool>();
  }
  return columns;
}

// The columns of a CreateItems batch: per column a sequence of WeakCellRefs,
// a sequence of offsets and a squeeze flag.
std::vector<BatchColumn> BatchFromPython(const py::sequence& refs,
                                         const py::sequence& offsets,
                                         const py::sequence& squeeze) {
  const size_t num_columns = refs.size();
  if (offsets.size() != num_columns || squeeze.size() != num_columns) {
    throw py::value_error(
        "CreateItems needs offsets and a squeeze flag per column.");
  }
  std::vector<BatchColumn> columns(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    columns[c].refs = CellRefs(refs[c]);
    columns[c].offsets = offsets[c].cast<std::vector<int>>();
    columns[c].squeeze = squeeze[c].cast<bool>();
  }
  return columns;
}

// Views of up to `capacity` arrays, which it keeps (with the strings it
// converted) while the views are used.
class ArrayViews {
 public:
  explicit ArrayViews(size_t capacity) { arrays_.reserve(capacity); }

  // Raises what NumpyView::Of refuses.
  TensorView Add(py::handle array) {
    arrays_.push_back(ValueOrRaise(NumpyView::Of(array)));
    return arrays_.back().view();
  }

 private:
  std::vector<NumpyView> arrays_;  // Reserved: never reallocated.
};

// The arrays of a step or batch (None for absent columns), viewed.
struct OptionalViews {
  explicit OptionalViews(const py::list& arrays) : arrays_(arrays.size()) {
    views.reserve(arrays.size());
    for (const auto& array : arrays) {
      if (array.is_none()) {
        views.emplace_back();
      } else {
        views.emplace_back(arrays_.Add(array));
      }
    }
  }

  std::vector<std::optional<TensorView>> views;

 private:
  ArrayViews arrays_;
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

void BindWriters(py::module_& m) {
  py::class_<Writer>(m, "Writer")
      .def("Append",
           [](Writer& self, const py::list& step) {
             // Views: a step that makes a chunk on its own is compressed
             // straight from the arrays.
             ArrayViews arrays(step.size());
             std::vector<TensorView> views;
             views.reserve(step.size());
             for (const auto& array : step) views.push_back(arrays.Add(array));
             RunWithoutGil([&] { return self.AppendViews(views); });
           })
      .def(
          "InsertStep",
          [](Writer& self, const py::list& step,
             const std::vector<std::pair<std::string, double>>& items,
             std::optional<int64_t> timeout_ms) {
            ArrayViews arrays(step.size());
            std::vector<TensorView> views;
            views.reserve(step.size());
            for (const auto& array : step) views.push_back(arrays.Add(array));
            RunWithoutGil([&] {
              return self.InsertStep(views, items, TimeoutFromMs(timeout_ms));
            });
          },
          py::arg("step"), py::arg("items"), py::arg("timeout_ms") = py::none())
      .def("AppendSequence",
           [](Writer& self, const py::list& sequence) {
             std::vector<Tensor> tensors = TensorsFromPython(sequence);
             RunWithoutGil(
                 [&] { return self.AppendSequence(std::move(tensors)); });
           })
      .def(
          "CreateItem",
          [](Writer& self, const std::string& table, int num_timesteps,
             double priority, bool hold) {
            RunWithoutGil([&] {
              return self.CreateItem(table, num_timesteps, priority, hold);
            });
          },
          py::arg("table"), py::arg("num_timesteps"), py::arg("priority"),
          py::arg("hold") = false)
      .def(
          "ReleaseHeldItems",
          [](Writer& self, const std::vector<bool>& keep) {
            RunWithoutGil([&] { return self.ReleaseHeldItems(keep); });
          },
          py::arg("keep"))
      .def(
          "Connected",
          [](Writer& self, int64_t wait_ms) {
            py::gil_scoped_release release;
            return self.Connected(absl::Milliseconds(wait_ms));
          },
          py::arg("wait_ms") = 0)
      .def("NewEpisode",
           [](Writer& self) {
             RunWithoutGil([&] { return self.NewEpisode(); });
           })
      .def(
          "Flush",
          [](Writer& self, std::optional<int64_t> timeout_ms) {
            RunWithoutGil(
                [&] { return self.Flush(TimeoutFromMs(timeout_ms)); });
          },
          py::arg("timeout_ms") = py::none())
      .def(
          "Close",
          [](Writer& self, std::optional<int64_t> timeout_ms) {
            RunWithoutGil(
                [&] { return self.Close(TimeoutFromMs(timeout_ms)); });
          },
          py::arg("timeout_ms") = py::none())
      .def("__repr__", &Writer::DebugString);

  py::class_<ChunkerOptions, std::shared_ptr<ChunkerOptions>>(m,
                                                              "ChunkerOptions")
      .def("__eq__",
           [](const ChunkerOptions& self, const ChunkerOptions& other) {
             auto* a = dynamic_cast<const AutoTunedChunkerOptions*>(&self);
             auto* b = dynamic_cast<const AutoTunedChunkerOptions*>(&other);
             if ((a == nullptr) != (b == nullptr)) return false;
             if (a != nullptr &&
                 a->throughput_weight() != b->throughput_weight()) {
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
             std::shared_ptr<ConstantChunkerOptions>>(m,
                                                      "ConstantChunkerOptions")
      .def(py::init<int, int, bool>(), py::arg("max_chunk_length"),
           py::arg("num_keep_alive_refs"), py::arg("delta_encode") = false);
  py::class_<AutoTunedChunkerOptions, ChunkerOptions,
             std::shared_ptr<AutoTunedChunkerOptions>>(
      m, "AutoTunedChunkerOptions")
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
      .def_property_readonly("shape",
                             [](const WeakCellRef& self) {
                               const auto& shape = self.Lock()->shape();
                               return std::vector<std::optional<int64_t>>(
                                   shape.begin(), shape.end());
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
      .def(
          "AppendBatch",
          [](TrajectoryWriter& self, const py::list& columns) {
            OptionalViews batch(columns);
            absl::StatusOr<
                std::vector<std::optional<std::vector<std::weak_ptr<CellRef>>>>>
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
          "CreateItems",
          [](TrajectoryWriter& self, const std::string& table,
             const py::array_t<double, py::array::c_style |
                                           py::array::forcecast>& priorities,
             const py::sequence& refs, const py::sequence& offsets,
             const py::sequence& squeeze) {
            if (priorities.ndim() != 1) {
              throw py::value_error("CreateItems needs one priority per item.");
            }
            std::vector<BatchColumn> columns =
                BatchFromPython(refs, offsets, squeeze);
            const absl::Span<const double> values(
                priorities.data(), static_cast<size_t>(priorities.size()));
            RunWithoutGil(
                [&] { return self.CreateItems(table, values, columns); });
          },
          py::arg("table"), py::arg("priorities"), py::arg("refs"),
          py::arg("offsets"), py::arg("squeeze_column"))
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
            const absl::Duration timeout = timeout_ms.has_value()
                                               ? absl::Milliseconds(*timeout_ms)
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
            RunWithoutGil([&] {
              return self.ConfigureChunker(column, options->Clone());
            });
          },
          py::arg("column"), py::arg("options"))
      .def_property_readonly("max_num_keep_alive_refs",
                             &TrajectoryWriter::max_num_keep_alive_refs)
      .def_property_readonly("episode_steps", &TrajectoryWriter::episode_steps)
      .def_property_readonly("num_pending_items",
                             &TrajectoryWriter::num_pending_items)
      .def_property_readonly("num_streamed_chunks",
                             &TrajectoryWriter::num_streamed_chunks);
}

}  // namespace deepmind::reverb
