#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "cc/client/channel_security.h"
#include "cc/service/server_security.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {

void BindSecurity(py::module_& m) {
  // Fields take str or bytes: PEM text or a path (channel_security.h).
  py::class_<ChannelSecurity>(m, "ChannelSecurity")
      .def(py::init<>())
      .def_readwrite("tls", &ChannelSecurity::tls)
      .def_readwrite("root_certificates", &ChannelSecurity::root_certificates)
      .def_readwrite("certificate_chain", &ChannelSecurity::certificate_chain)
      .def_readwrite("private_key", &ChannelSecurity::private_key)
      .def_readwrite("server_name_override",
                     &ChannelSecurity::server_name_override)
      .def_readwrite("auth_token", &ChannelSecurity::auth_token);
  py::class_<ServerSecurity>(m, "ServerSecurity")
      .def(py::init<>())
      .def_readwrite("certificate_chain", &ServerSecurity::certificate_chain)
      .def_readwrite("private_key", &ServerSecurity::private_key)
      .def_readwrite("client_ca", &ServerSecurity::client_ca)
      .def_readwrite("require_client_auth",
                     &ServerSecurity::require_client_auth)
      .def_readwrite("auth_token", &ServerSecurity::auth_token);
  m.def("channel_security_from_environment",
        [] { return ValueOrRaise(ChannelSecurityFromEnvironment()); });
  m.def(
      "register_channel_security",
      [](const std::string& address, ChannelSecurity security) {
        RegisterChannelSecurity(address, std::move(security));
      },
      py::arg("address"), py::arg("security"));
}

}  // namespace deepmind::reverb
