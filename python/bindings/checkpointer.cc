#include "cc/checkpointing/checkpointer.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cc/core/table.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {

void BindCheckpointer(py::module_& m) {
  py::class_<Checkpointer, std::shared_ptr<Checkpointer>>(m, "Checkpointer")
      .def(py::init([](const std::string& root_dir, const std::string& group,
                       std::optional<std::string> fallback_checkpoint_path,
                       int keep_latest, int zlib_level,
                       bool use_checkpoint_table_options) {
             CheckpointerOptions options;
             options.keep_latest = keep_latest;
             options.zlib_level = zlib_level;
             options.use_checkpoint_table_options =
                 use_checkpoint_table_options;
             return std::make_shared<Checkpointer>(
                 root_dir, group, std::move(fallback_checkpoint_path), options);
           }),
           py::arg("root_dir"), py::arg("group") = "",
           py::arg("fallback_checkpoint_path") = py::none(),
           py::arg("keep_latest") = 1, py::arg("zlib_level") = 0,
           py::arg("use_checkpoint_table_options") = true)
      .def(
          "save",
          [](Checkpointer& self,
             const std::vector<std::shared_ptr<Table>>& tables,
             int keep_latest) {
            return RunWithoutGil(
                [&] { return self.Save(tables, keep_latest); });
          },
          py::arg("tables"), py::arg("keep_latest") = 0)
      .def(
          "load",
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
        return std::make_shared<Checkpointer>(
            name, group, std::move(fallback_checkpoint_path));
      },
      py::arg("name"), py::arg("group") = "",
      py::arg("fallback_checkpoint_path") = py::none());
}

}  // namespace deepmind::reverb
