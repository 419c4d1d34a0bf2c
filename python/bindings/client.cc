#include "cc/client/client.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cc/client/chunker.h"
#include "cc/client/connection.h"
#include "cc/client/legacy_writer.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/client/sampler.h"
#include "cc/client/trajectory_writer.h"
#include "cc/support/keepalive.h"
#include "python/bindings/bind.h"
#include "python/bindings/call.h"

namespace py = pybind11;

namespace deepmind::reverb {
namespace {

// Arrays read in place when they have this dtype and C order already (the
// Python client makes them so).
using UInt64Array = py::array_t<uint64_t, py::array::c_style>;
using Float64Array = py::array_t<double, py::array::c_style>;

// (tables_state_id as a 128-bit int, [serialized TableInfo]).
py::tuple ServerInfoToPython(const ServerInfoResponse& info) {
  py::list tables;
  for (const auto& table : info.table_info()) {
    tables.append(py::bytes(table.SerializeAsString()));
  }
  py::int_ high(info.tables_state_id().high());
  py::int_ low(info.tables_state_id().low());
  py::object state_id = (high.attr("__lshift__")(64)).attr("__or__")(low);
  return py::make_tuple(state_id, tables);
}

std::vector<absl::StatusOr<ServerInfoResponse>> ShardInfoWithoutGil(
    Client& client, std::optional<int64_t> timeout_ms) {
  py::gil_scoped_release release;
  return client.ShardInfo(TimeoutFromMs(timeout_ms));
}

absl::Duration Keepalive(std::optional<int64_t> keepalive_ms) {
  if (!keepalive_ms.has_value()) return KeepaliveFromEnvironment();
  if (*keepalive_ms < 0) {
    RaiseFromStatus(absl::InvalidArgumentError(absl::StrCat(
        "keepalive_ms (", *keepalive_ms, ") must be >= 0 (0: no keepalive).")));
  }
  return *keepalive_ms == 0 ? absl::InfiniteDuration()
                            : absl::Milliseconds(*keepalive_ms);
}

}  // namespace

void BindClient(py::module_& m) {
  py::class_<Client>(m, "Client")
      // One address, or several (shards); ValueError for none or an empty
      // one. `keepalive_ms`: the channels' keepalive interval (0: none;
      // None: REVERB_KEEPALIVE_MS or the default, cc/support/keepalive.h).
      // `security`: None: each address's DefaultChannelSecurity.
      .def(py::init([](const std::string& server_address,
                       std::optional<int64_t> keepalive_ms,
                       std::optional<ChannelSecurity> security) {
             return ValueOrRaise(Client::Create({server_address},
                                                Keepalive(keepalive_ms),
                                                std::move(security)));
           }),
           py::arg("server_address"), py::arg("keepalive_ms") = py::none(),
           py::arg("security") = py::none())
      .def(py::init([](std::vector<std::string> server_addresses,
                       std::optional<int64_t> keepalive_ms,
                       std::optional<ChannelSecurity> security) {
             return ValueOrRaise(Client::Create(std::move(server_addresses),
                                                Keepalive(keepalive_ms),
                                                std::move(security)));
           }),
           py::arg("server_addresses"), py::arg("keepalive_ms") = py::none(),
           py::arg("security") = py::none())
      .def(
          "NewWriter",
          [](Client& self, int chunk_length, int max_timesteps,
             bool delta_encoded, int max_in_flight_items) {
            WriterOptions options;
            options.chunk_length = chunk_length;
            options.max_timesteps = max_timesteps;
            options.delta_encoded = delta_encoded;
            options.max_in_flight_items = max_in_flight_items;
            return ValueOrRaise(self.NewWriter(options));
          },
          py::arg("chunk_length"), py::arg("max_timesteps"),
          py::arg("delta_encoded") = false, py::arg("max_in_flight_items") = 25)
      .def(
          "NewSampler",
          [](Client& self, const std::string& table, int64_t max_samples,
             int64_t max_in_flight_samples_per_worker, int num_workers,
             int64_t max_samples_per_stream,
             std::optional<int64_t> rate_limiter_timeout_ms, bool unpack_ahead,
             int64_t max_in_flight_bytes_per_worker) {
            SamplerOptions options;
            options.unpack_ahead = unpack_ahead;
            options.max_in_flight_bytes_per_worker =
                max_in_flight_bytes_per_worker;
            options.max_samples = max_samples;
            options.max_in_flight_samples_per_worker =
                max_in_flight_samples_per_worker;
            options.num_workers = num_workers;
            options.max_samples_per_stream = max_samples_per_stream;
            options.rate_limiter_timeout =
                TimeoutFromMs(rate_limiter_timeout_ms);
            return ValueOrRaise(self.NewSampler(table, options));
          },
          py::arg("table"), py::arg("max_samples"),
          py::arg("max_in_flight_samples_per_worker") = 100,
          py::arg("num_workers") = 1, py::arg("max_samples_per_stream") = 10000,
          py::arg("rate_limiter_timeout_ms") = py::none(),
          py::arg("unpack_ahead") = true,
          py::arg("max_in_flight_bytes_per_worker") = 0)
      .def(
          "NewTrajectoryWriter",
          [](Client& self, const std::shared_ptr<ChunkerOptions>& options) {
            return ValueOrRaise(self.NewTrajectoryWriter(options->Clone()));
          },
          py::arg("chunker_options"))
      .def(
          "NewSampleStream",
          [](Client& self, const std::string& table,
             std::optional<int64_t> timeout_ms) {
            return RunWithoutGil([&] {
              return self.NewSampleStream(table, TimeoutFromMs(timeout_ms));
            });
          },
          py::arg("table"), py::arg("timeout_ms") = py::none())
      .def(
          "MutatePriorities",
          [](Client& self, const std::string& table,
             const std::vector<std::pair<uint64_t, double>>& updates,
             const std::vector<uint64_t>& deletes,
             std::optional<int64_t> timeout_ms) {
            const PriorityArrays arrays = PriorityUpdates(updates);
            RunWithoutGil([&] {
              return self.MutatePriorities(table, arrays.keys,
                                           arrays.priorities, deletes,
                                           TimeoutFromMs(timeout_ms));
            });
          },
          py::arg("table"), py::arg("updates"), py::arg("deletes"),
          py::arg("timeout_ms") = py::none())
      // The same from 1-D arrays, read in place (the caller checks and
      // converts them: uint64 keys, float64 priorities, C order).
      .def(
          "MutatePrioritiesArrays",
          [](Client& self, const std::string& table, const UInt64Array& keys,
             const Float64Array& priorities, const UInt64Array& deletes,
             std::optional<int64_t> timeout_ms) {
            RunWithoutGil([&] {
              return self.MutatePriorities(
                  table, absl::MakeConstSpan(keys.data(), keys.size()),
                  absl::MakeConstSpan(priorities.data(), priorities.size()),
                  absl::MakeConstSpan(deletes.data(), deletes.size()),
                  TimeoutFromMs(timeout_ms));
            });
          },
          py::arg("table"), py::arg("keys"), py::arg("priorities"),
          py::arg("deletes"), py::arg("timeout_ms") = py::none())
      .def(
          "Reset",
          [](Client& self, const std::string& table,
             std::optional<int64_t> timeout_ms) {
            RunWithoutGil(
                [&] { return self.Reset(table, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("table"), py::arg("timeout_ms") = py::none())
      // (tables_state_id as a 128-bit int, [serialized TableInfo]).
      .def(
          "ServerInfo",
          [](Client& self, std::optional<int64_t> timeout_ms) {
            return ServerInfoToPython(RunWithoutGil(
                [&] { return self.ServerInfo(TimeoutFromMs(timeout_ms)); }));
          },
          py::arg("timeout_ms") = py::none())
      // Per shard, in the order of the addresses: ServerInfo's tuple, or
      // the exception of the shard's error.
      .def(
          "ShardInfo",
          [](Client& self, std::optional<int64_t> timeout_ms) {
            py::list shards;
            for (const auto& info : ShardInfoWithoutGil(self, timeout_ms)) {
              if (info.ok()) {
                shards.append(ServerInfoToPython(*info));
              } else {
                shards.append(ExceptionFromStatus(info.status()));
              }
            }
            return shards;
          },
          py::arg("timeout_ms") = py::none())
      // Per shard: its ServerInfo's checkpoint_progress as (saving,
      // bytes_done, bytes_total, elapsed_ms), or None if it has none (a
      // dm-reverb server) or did not answer.
      .def(
          "CheckpointProgress",
          [](Client& self, std::optional<int64_t> timeout_ms) {
            py::list shards;
            for (const auto& info : ShardInfoWithoutGil(self, timeout_ms)) {
              if (info.ok() && info->has_checkpoint_progress()) {
                const CheckpointProgress& p = info->checkpoint_progress();
                shards.append(py::make_tuple(p.saving(), p.bytes_done(),
                                             p.bytes_total(), p.elapsed_ms()));
              } else {
                shards.append(py::none());
              }
            }
            return shards;
          },
          py::arg("timeout_ms") = py::none())
      .def(
          "Checkpoint",
          [](Client& self, std::optional<int64_t> timeout_ms) {
            return RunWithoutGil(
                [&] { return self.Checkpoint(TimeoutFromMs(timeout_ms)); });
          },
          py::arg("timeout_ms") = py::none());
}

}  // namespace deepmind::reverb
