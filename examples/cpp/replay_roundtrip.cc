// A server with one table, a TrajectoryWriter that inserts every window of
// three steps as an item, and a Sampler that reads items back and checks
// them. Exits 0 if every check passes, else 1 with the failure on stderr.
// Built against an installed libreverb: see README.md.
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "reverb/cc/client/client.h"
#include "reverb/cc/client/trajectory_writer.h"
#include "reverb/cc/rate_limiters/presets.h"
#include "reverb/cc/selectors/fifo.h"
#include "reverb/cc/selectors/uniform.h"
#include "reverb/cc/service/server.h"
#include "reverb/cc/support/status_macros.h"

namespace reverb = deepmind::reverb;

constexpr int kSteps = 10;
constexpr int kWindow = 3;
constexpr int kItems = kSteps - kWindow + 1;

// Step t of the episode: the float32 vector {t, -t}.
reverb::Tensor Step(int t) {
  const float values[2] = {1.f * t, -1.f * t};
  reverb::Tensor tensor;
  tensor.dtype = tensorflow::DT_FLOAT;
  tensor.shape = {2};
  tensor.bytes.assign(reinterpret_cast<const char*>(values), sizeof(values));
  return tensor;
}

// A sampled item must be kWindow consecutive steps of the episode.
absl::Status CheckSample(const reverb::Sample& sample) {
  if (sample.info->table_size() != kItems) {
    return absl::InternalError(
        absl::StrCat("table_size ", sample.info->table_size()));
  }
  const reverb::Tensor& column = sample.columns.at(0);
  if (column.dtype != tensorflow::DT_FLOAT ||
      column.shape != std::vector<int64_t>{kWindow, 2}) {
    return absl::InternalError("column is not float32[3, 2]");
  }
  float values[kWindow][2];
  std::memcpy(values, column.bytes.data(), sizeof(values));
  for (int i = 0; i < kWindow; ++i) {
    const float t = values[0][0] + i;
    if (values[i][0] != t || values[i][1] != -t) {
      return absl::InternalError(absl::StrCat("row ", i, " is {", values[i][0],
                                              ", ", values[i][1], "}"));
    }
  }
  return absl::OkStatus();
}

absl::Status Run() {
  // A table of at most 1000 items, sampled uniformly once it holds one.
  REVERB_ASSIGN_OR_RETURN(reverb::RateLimiter limiter,
                          reverb::MinSizeRateLimiter(1));
  REVERB_ASSIGN_OR_RETURN(
      std::shared_ptr<reverb::Table> table,
      reverb::Table::Create(
          "replay", std::make_unique<reverb::UniformSelector>(),
          std::make_unique<reverb::FifoSelector>(),
          /*max_size=*/1000, /*max_times_sampled=*/0, std::move(limiter)));
  // Port 0 picks a free port; "localhost" serves this host only.
  REVERB_ASSIGN_OR_RETURN(
      std::unique_ptr<reverb::Server> server,
      reverb::Server::Start({table}, /*port=*/0, "localhost"));
  reverb::Client client("localhost:" + std::to_string(server->port()));

  // Chunks of 2 steps; the last kWindow steps stay referable.
  REVERB_ASSIGN_OR_RETURN(
      std::unique_ptr<reverb::TrajectoryWriter> writer,
      client.NewTrajectoryWriter(
          std::make_shared<reverb::ConstantChunkerOptions>(
              /*max_chunk_length=*/2, /*num_keep_alive_refs=*/kWindow)));
  std::vector<std::weak_ptr<reverb::CellRef>> history;
  for (int t = 0; t < kSteps; ++t) {
    // One column; Append returns one (optional) ref per column.
    REVERB_ASSIGN_OR_RETURN(auto refs, writer->Append({Step(t)}));
    history.push_back(*refs[0]);
    if (t >= kWindow - 1) {
      reverb::TrajectoryColumn column;
      column.refs.assign(history.end() - kWindow, history.end());
      REVERB_RETURN_IF_ERROR(
          writer->CreateItem("replay", /*priority=*/1.0, {column}));
    }
  }
  // Sends what is queued and waits until the server confirmed every item.
  REVERB_RETURN_IF_ERROR(
      writer->Flush(/*ignore_last_num_items=*/0, absl::Seconds(10)));

  reverb::SamplerOptions options;
  options.max_samples = 2 * kItems;
  REVERB_ASSIGN_OR_RETURN(std::unique_ptr<reverb::Sampler> sampler,
                          client.NewSampler("replay", options));
  for (int i = 0; i < options.max_samples; ++i) {
    REVERB_ASSIGN_OR_RETURN(reverb::Sample sample,
                            sampler->GetNextSample(absl::Seconds(10)));
    REVERB_RETURN_IF_ERROR(CheckSample(sample));
  }
  server->Stop();
  return absl::OkStatus();
}

int main() {
  const absl::Status status = Run();
  if (!status.ok()) {
    std::cerr << "replay_roundtrip: " << status << "\n";
    return 1;
  }
  std::cout << "replay_roundtrip: " << kItems << " items written, "
            << 2 * kItems << " samples checked\n";
  return 0;
}
