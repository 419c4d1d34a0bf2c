// PYBIND11_MODULE(pybind): binds the groups of bind.h in its order.
#include <pybind11/pybind11.h>

#include "python/bindings/bind.h"

PYBIND11_MODULE(pybind, m) {
  using namespace deepmind::reverb;  // NOLINT
  m.doc() = "Bindings of libreverb (see reverb/pybind.pyi).";
  BindLog(m);
  BindSelectors(m);
  BindRateLimiters(m);
  BindTables(m);
  BindCheckpointer(m);
  BindSecurity(m);
  BindServer(m);
  BindWriters(m);
  BindSampler(m);
  BindClient(m);
}
