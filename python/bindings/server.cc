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
#include "cc/service/server_limits.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {

void BindServer(py::module_& m) {
  // Defaults as server_limits.h; the timeout in seconds (inf: none).
  py::class_<ServerLimits>(m, "ServerLimits")
      .def(py::init<>())
      .def_readwrite("max_held_chunk_bytes_per_stream",
                     &ServerLimits::max_held_chunk_bytes_per_stream)
      .def_readwrite("max_held_chunk_bytes",
                     &ServerLimits::max_held_chunk_bytes)
      .def_readwrite("max_message_bytes", &ServerLimits::max_message_bytes)
      .def_readwrite("max_concurrent_streams_per_connection",
                     &ServerLimits::max_concurrent_streams_per_connection)
      .def_readwrite("max_samples_per_request",
                     &ServerLimits::max_samples_per_request)
      .def_property(
          "stalled_sample_stream_timeout_seconds",
          [](const ServerLimits& self) {
            return absl::ToDoubleSeconds(self.stalled_sample_stream_timeout);
          },
          [](ServerLimits& self, double seconds) {
            self.stalled_sample_stream_timeout = absl::Seconds(seconds);
          })
      // ValueError naming the first limit that is not positive.
      .def("validate", [](const ServerLimits& self) {
        MaybeRaise(ValidateServerLimits(self));
      });

  py::class_<Server, std::shared_ptr<Server>>(m, "Server")
      .def(py::init([](const std::vector<std::shared_ptr<Table>>& tables,
                       std::optional<int> port,
                       std::shared_ptr<Checkpointer> checkpointer,
                       const std::string& bind_address,
                       std::optional<double> checkpoint_every_seconds,
                       const std::string& unix_socket_path,
                       const ServerLimits& limits,
                       std::optional<ServerSecurity> security,
                       std::optional<int> metrics_port) {
             ServerOptions options;
             options.metrics_port = metrics_port;
             options.limits = limits;
             if (security.has_value()) options.security = *std::move(security);
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
           py::arg("unix_socket_path") = "", py::arg("limits") = ServerLimits(),
           py::arg("security") = py::none(),
           py::arg("metrics_port") = py::none())
      .def_property_readonly("port", &Server::port)
      .def_property_readonly("unix_socket_path", &Server::unix_socket_path)
      // 0 without a metrics port.
      .def_property_readonly("metrics_port", &Server::metrics_port)
      // ReverbServiceImpl::num_open_streams.
      .def_property_readonly(
          "num_open_streams",
          [](const Server& self) { return self.service().num_open_streams(); })
      // Bytes of the chunks insert streams keep (ServerLimits).
      .def_property_readonly("held_chunk_bytes",
                             [](const Server& self) {
                               return self.service().held_chunk_bytes()->held();
                             })
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
