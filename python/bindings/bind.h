// reverb.pybind: the Python face of libreverb, one Bind function per group
// of classes (python/bindings/<group>.cc).
//
// Thin by design: argument conversion, status -> exception mapping and GIL
// release around every call that can block or take a table lock (the
// conventions of call.h). Validation and semantics live in C++; user-facing
// docs live in the Python modules, the API in reverb/pybind.pyi.
//
// module.cc calls these in the order below: a function binds only classes
// whose arguments and results are bound by itself or by the functions
// before it (pybind11 names them in the signatures it writes at binding
// time).
#ifndef REVERB_PYTHON_BINDINGS_BIND_H_
#define REVERB_PYTHON_BINDINGS_BIND_H_

#include <pybind11/pybind11.h>

namespace deepmind::reverb {

// set_log_sink: where libreverb's log lines go (cc/support/log.h).
void BindLog(pybind11::module_& m);

// ItemSelector and its kinds, selector_from_proto.
void BindSelectors(pybind11::module_& m);

// RateLimiter and the preset factories (min_size_rate_limiter, ...).
void BindRateLimiters(pybind11::module_& m);

// TableExtension (a placeholder) and Table.
void BindTables(pybind11::module_& m);

// Checkpointer, create_default_checkpointer.
void BindCheckpointer(pybind11::module_& m);

// ChannelSecurity, ServerSecurity and their environment and registry.
void BindSecurity(pybind11::module_& m);

// Server.
void BindServer(pybind11::module_& m);

// The legacy Writer; ChunkerOptions and its kinds, WeakCellRef and
// TrajectoryWriter.
void BindWriters(pybind11::module_& m);

// Sampler (the multi-stream sampler) and SampleStream.
void BindSampler(pybind11::module_& m);

// Client, which makes the writers and samplers.
void BindClient(pybind11::module_& m);

}  // namespace deepmind::reverb

#endif  // REVERB_PYTHON_BINDINGS_BIND_H_
