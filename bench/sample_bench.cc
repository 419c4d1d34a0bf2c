// Client-side cost of sampling over shards: the CPU time, context switches
// and wall time per sample of one Sampler (one worker) reading small
// samples (one int32 each) of a Uniform table held by 1, 2, ... shards,
// each a server in a process of its own (this program, run with --serve).
//
//   build/dev/sample_bench [--samples=N] [--shards=1,4] [--in_flight=100]
//                          [--repeat=R] [--one_server]
//
// --one_server gives every shard the address of the same server: the
// client then keeps as many channels and streams, to one server process,
// which tells the client's costs of several channels from the effects of
// several server processes on one machine.
//
// Only the client process is measured (getrusage): the servers' work is
// theirs. On a loaded machine CPU times vary from run to run; for counts
// that do not, run it under `valgrind --tool=callgrind` (the servers are
// separate programs, which valgrind does not follow) with two sample counts
// and compare the difference of the instructions.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cc/client/client.h"
#include "cc/core/table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/selectors/fifo.h"
#include "cc/selectors/uniform.h"
#include "cc/service/server.h"
#include "cc/tensor/compression.h"

namespace deepmind::reverb {
namespace {

constexpr int kItems = 1000;
constexpr char kTable[] = "bench";

TableItem Int32Item(uint64_t key) {
  ChunkData data;
  data.set_chunk_key(key + 1'000'000);
  data.mutable_sequence_range()->set_episode_id(1);
  Tensor step;
  step.dtype = tensorflow::DT_INT32;
  step.shape = {1};
  const int32_t value = static_cast<int32_t>(key);
  step.bytes.assign(reinterpret_cast<const char*>(&value), sizeof(value));
  // A valid tensor: cannot fail.
  CompressTensorAsProto(std::move(step), data.mutable_data()->add_tensors())
      .IgnoreError();
  data.set_data_tensors_len(1);
  data.set_data_uncompressed_size(sizeof(value));
  TableItem item;
  item.item.set_key(key);
  item.item.set_table(kTable);
  item.item.set_priority(1);
  auto* slice =
      item.item.mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(data.chunk_key());
  slice->set_length(1);
  item.chunks.push_back(std::make_shared<Chunk>(std::move(data)));
  return item;
}

// --serve: a server of kItems items on loopback; prints its port, then
// serves until its standard input closes.
int Serve() {
  auto table = Table::Create(kTable, std::make_unique<UniformSelector>(),
                             std::make_unique<FifoSelector>(), kItems, 0,
                             *MinSizeRateLimiter(1));
  if (!table.ok()) return 1;
  for (uint64_t key = 0; key < kItems; ++key) {
    if (!(*table)->InsertOrAssign(Int32Item(key)).ok()) return 1;
  }
  auto server = Server::Start({*table}, 0, "localhost");
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  return 0;
}

// A server started by Spawn: closing `to_server` stops it.
struct ServerProcess {
  pid_t pid;
  int to_server;
  std::string address;
};

ServerProcess Spawn(const char* self) {
  int to_server[2], from_server[2];
  // Close-on-exec: the other servers must not hold this one's pipe open.
  if (pipe2(to_server, O_CLOEXEC) != 0 || pipe2(from_server, O_CLOEXEC) != 0) {
    std::abort();
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(to_server[0], STDIN_FILENO);
    dup2(from_server[1], STDOUT_FILENO);
    close(to_server[1]);
    close(from_server[0]);
    execl(self, self, "--serve", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_server[0]);
  close(from_server[1]);
  char port[16] = {};
  for (size_t n = 0; n + 1 < sizeof(port);) {
    if (read(from_server[0], port + n, 1) != 1 || port[n] == '\n') break;
    ++n;
  }
  close(from_server[0]);
  return {pid, to_server[1], std::string("localhost:") + port};
}

struct Usage {
  double cpu_seconds;
  long context_switches;
  absl::Time wall;
};

Usage Now() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return {seconds(usage.ru_utime) + seconds(usage.ru_stime),
          usage.ru_nvcsw + usage.ru_nivcsw, absl::Now()};
}

// Draws `samples` samples from the shards; false on an error.
bool Draw(Client& client, int64_t samples, int64_t in_flight) {
  SamplerOptions options;
  options.max_samples = samples;
  options.max_in_flight_samples_per_worker = in_flight;
  auto sampler = client.NewSampler(kTable, options);
  if (!sampler.ok()) return false;
  for (int64_t i = 0; i < samples; ++i) {
    auto sample = (*sampler)->GetNextSample(absl::Seconds(30));
    if (!sample.ok()) {
      std::fprintf(stderr, "%s\n", sample.status().ToString().c_str());
      return false;
    }
  }
  return true;
}

std::vector<int64_t> Numbers(const char* text) {
  std::vector<int64_t> numbers;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t n;
    if (!absl::SimpleAtoi(part, &n) || n < 1) std::exit(2);
    numbers.push_back(n);
  }
  return numbers;
}

int Run(int argc, char** argv) {
  int64_t samples = 200'000, in_flight = 100, repeat = 1;
  bool one_server = false;
  std::vector<int64_t> shard_counts = {1, 4};
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    auto value = [arg](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return std::strncmp(arg, name, n) == 0 && arg[n] == '=' ? arg + n + 1
                                                              : nullptr;
    };
    if (std::strcmp(arg, "--serve") == 0) return Serve();
    if (std::strcmp(arg, "--one_server") == 0) {
      one_server = true;
      continue;
    }
    if (const char* v = value("--samples")) {
      samples = Numbers(v)[0];
    } else if (const char* v = value("--in_flight")) {
      in_flight = Numbers(v)[0];
    } else if (const char* v = value("--repeat")) {
      repeat = Numbers(v)[0];
    } else if (const char* v = value("--shards")) {
      shard_counts = Numbers(v);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg);
      return 2;
    }
  }
  int64_t most = 0;
  for (int64_t n : shard_counts) most = std::max(most, n);
  std::vector<ServerProcess> servers;
  for (int64_t s = 0; s < (one_server ? 1 : most); ++s) {
    servers.push_back(Spawn(argv[0]));
  }

  std::printf("%6s %9s %9s %14s %12s %13s\n", "shards", "in_flight", "samples",
              "cpu_us/sample", "cs/sample", "wall_us/sample");
  int failed = 0;
  for (int64_t r = 0; r < repeat; ++r) {
    for (int64_t shards : shard_counts) {
      std::vector<std::string> addresses;
      for (int64_t s = 0; s < shards; ++s) {
        addresses.push_back(servers[one_server ? 0 : s].address);
      }
      auto client = Client::Create(addresses);
      // Connects the channels and lets Shards learn the tables.
      if (!client.ok() || !Draw(**client, 1000, in_flight)) {
        failed = 1;
        break;
      }
      const Usage start = Now();
      if (!Draw(**client, samples, in_flight)) {
        failed = 1;
        break;
      }
      const Usage end = Now();
      std::printf(
          "%6lld %9lld %9lld %14.3f %12.3f %13.3f\n",
          static_cast<long long>(shards), static_cast<long long>(in_flight),
          static_cast<long long>(samples),
          1e6 * (end.cpu_seconds - start.cpu_seconds) / samples,
          static_cast<double>(end.context_switches - start.context_switches) /
              samples,
          1e6 * absl::ToDoubleSeconds(end.wall - start.wall) / samples);
      std::fflush(stdout);
    }
  }
  for (ServerProcess& server : servers) {
    close(server.to_server);
    waitpid(server.pid, nullptr, 0);
  }
  return failed;
}

}  // namespace
}  // namespace deepmind::reverb

int main(int argc, char** argv) { return deepmind::reverb::Run(argc, argv); }
