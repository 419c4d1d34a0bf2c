#include "cc/service/server.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/checkpointing/checkpointer.h"
#include "cc/core/table.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {

void BindServer(py::module_& m) {
  py::class_<Server, std::shared_ptr<Server>>(m, "Server")
      .def(py::init([](const std::vector<std::shared_ptr<Table>>& tables,
                       int port, std::shared_ptr<Checkpointer> checkpointer,
                       const std::string& bind_address,
                       std::optional<double> checkpoint_every_seconds) {
             return std::shared_ptr<Server>(RunWithoutGil([&] {
               return Server::Start(
                   tables, port, bind_address, std::move(checkpointer),
                   checkpoint_every_seconds.has_value()
                       ? absl::Seconds(*checkpoint_every_seconds)
                       : absl::InfiniteDuration());
             }));
           }),
           py::arg("priority_tables"), py::arg("port"),
           py::arg("checkpointer") = nullptr,
           py::arg("bind_address") = "localhost",
           py::arg("checkpoint_every_seconds") = py::none())
      .def_property_readonly("port", &Server::port)
      // ReverbServiceImpl::num_open_streams.
      .def_property_readonly(
          "num_open_streams",
          [](const Server& self) { return self.service().num_open_streams(); })
      .def("Stop", &Server::Stop, py::call_guard<py::gil_scoped_release>())
      // True once stopped; false if `timeout_ms` (None: forever) passed.
      .def(
          "Wait",
          [](Server& self, std::optional<int64_t> timeout_ms) {
            py::gil_scoped_release release;
            return self.Wait(TimeoutFromMs(timeout_ms));
          },
          py::arg("timeout_ms") = py::none());
}

}  // namespace deepmind::reverb
