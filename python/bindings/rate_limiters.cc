#include <pybind11/pybind11.h>

#include <cstdint>

#include "cc/rate_limiters/presets.h"
#include "cc/rate_limiters/rate_limiter.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {

void BindRateLimiters(py::module_& m) {
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
      [](int64_t min_size) {
        return ValueOrRaise(MinSizeRateLimiter(min_size));
      },
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
}

}  // namespace deepmind::reverb
