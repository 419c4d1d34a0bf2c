#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "cc/selectors/fifo.h"
#include "cc/selectors/from_options.h"
#include "cc/selectors/heap.h"
#include "cc/selectors/interface.h"
#include "cc/selectors/prioritized.h"
#include "cc/selectors/uniform.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {

void BindSelectors(py::module_& m) {
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
}

}  // namespace deepmind::reverb
