#include "cc/client/sampler.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cc/client/sample.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/support/buffer_pool.h"
#include "cc/tensor/tensor.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"
#include "python/bindings/numpy_conversion.h"

namespace py = pybind11;

namespace deepmind::reverb {
namespace {

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

}  // namespace

void BindSampler(py::module_& m) {
  // The process's buffer pool (buffer_pool.h), which batches come from and
  // go back to once numpy frees them.
  m.def("buffer_pool_stats", [] {
    const BufferPool& pool = BufferPool::Default();
    py::dict stats;
    stats["kept_bytes"] = pool.kept_bytes();
    stats["reused"] = pool.reused();
    stats["given_kept"] = pool.given_kept();
    return stats;
  });
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
            absl::StatusOr<StackedBatch> batch;
            {
              py::gil_scoped_release release;
              batch = self.GetNextStackedBatch(batch_size,
                                               TimeoutFromMs(timeout_ms),
                                               TimeoutFromMs(fill_timeout_ms));
            }
            if (absl::IsOutOfRange(batch.status())) throw py::stop_iteration();
            StackedBatch stacked = ValueOrRaise(std::move(batch));
            const ssize_t n = static_cast<ssize_t>(stacked.infos.size());
            py::array_t<uint64_t> keys(n);
            py::array_t<double> probabilities(n);
            py::array_t<int64_t> table_sizes(n);
            py::array_t<double> priorities(n);
            py::array_t<int32_t> times_sampled(n);
            for (ssize_t i = 0; i < n; ++i) {
              const SampleInfo& info = *stacked.infos[i];
              keys.mutable_at(i) = info.item().key();
              probabilities.mutable_at(i) = info.probability();
              table_sizes.mutable_at(i) = info.table_size();
              priorities.mutable_at(i) = info.item().priority();
              times_sampled.mutable_at(i) = info.item().times_sampled();
            }
            py::list arrays;
            for (Tensor& column : stacked.columns) {
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

  py::class_<SampleStreamInterface>(m, "SampleStream")
      .def(
          "Request",
          [](SampleStreamInterface& self, int64_t n,
             std::optional<int64_t> timeout_ms) {
            RunWithoutGil(
                [&] { return self.Request(n, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("num_samples"),
          py::arg("rate_limiter_timeout_ms") = py::none())
      .def("Read",
           [](SampleStreamInterface& self) {
             return SampleToPython(RunWithoutGil([&] { return self.Read(); }));
           })
      .def_property_readonly("outstanding", &SampleStreamInterface::outstanding)
      .def_property_readonly("ok", &SampleStreamInterface::ok)
      .def("Cancel", &SampleStreamInterface::Cancel,
           py::call_guard<py::gil_scoped_release>())
      .def("Close", [](SampleStreamInterface& self) {
        RunWithoutGil([&] { return self.Close(); });
      });
}

}  // namespace deepmind::reverb
