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
                       std::optional<int> port,
                       std::shared_ptr<Checkpointer> checkpointer,
                       const std::string& bind_address,
                       std::optional<double> checkpoint_every_seconds,
                       const std::string& unix_socket_path) {
             ServerOptions options;
             options.port = port;
             options.bind_address = bind_address;
             options.unix_socket_path = unix_socket_path;
             options.checkpointer = std::move(checkpointer);
             if (checkpoint_every_seconds.has_value()) {
               options.checkpoint_interval =
                   absl::Seconds(*checkpoint_every_seconds);
             }
             return std::shared_ptr<Server>(RunWithoutGil(
                 [&] { return Server::Start(tables, std::move(options)); }));
           }),
           // port None: the unix socket only.
           py::arg("priority_tables"), py::arg("port"),
           py::arg("checkpointer") = nullptr,
           py::arg("bind_address") = "localhost",
           py::arg("checkpoint_every_seconds") = py::none(),
           py::arg("unix_socket_path") = "")
      .def_property_readonly("port", &Server::port)
      .def_property_readonly("unix_socket_path", &Server::unix_socket_path)
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
