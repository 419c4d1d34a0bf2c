// Fuzzes the client's reading of SampleStream responses from a hostile or
// broken server: the input is one SampleStreamResponse on the wire, whose
// entries are gathered into samples as SampleStream::ReadPacked gathers
// them (cc/client/sample_stream.cc: an entry with info starts the sample's
// info, every entry adds its chunks, end_of_sequence ends it) and unpacked
// (UnpackSample, cc/client/sample.h), then split into timesteps as the
// timestep datasets do. Anything may fail with a status; nothing may crash,
// and what unpacks must be consistent with the item it came from.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cc/client/sample.h"
#include "fuzz/fuzz_check.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {
namespace {

void Unpack(std::shared_ptr<const SampleInfo> info,
            const std::vector<const ChunkData*>& chunks) {
  auto sample = UnpackSample(info, chunks);
  if (!sample.ok()) return;
  FUZZ_CHECK(static_cast<int>(sample->columns.size()) ==
             info->item().flat_trajectory().columns_size());
  for (const Tensor& column : sample->columns) {
    FUZZ_CHECK(CheckElements(column).ok());
  }
  auto steps = NumTimesteps(*sample);
  if (!steps.ok() || *steps == 0) return;
  FUZZ_CHECK(GetTimestep(*sample, 0).ok());
  FUZZ_CHECK(GetTimestep(*sample, *steps - 1).ok());
  FUZZ_CHECK(!GetTimestep(*sample, *steps).ok());
}

}  // namespace
}  // namespace deepmind::reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepmind::reverb;  // NOLINT(build/namespaces)
  auto response = std::make_shared<SampleStreamResponse>();
  if (!response->ParseFromArray(data, static_cast<int>(size))) return 0;
  std::shared_ptr<const SampleInfo> info;
  std::vector<const ChunkData*> chunks;
  for (const auto& entry : response->entries()) {
    if (entry.has_info()) {
      info = std::shared_ptr<const SampleInfo>(response, &entry.info());
    }
    for (const ChunkData& chunk : entry.data()) chunks.push_back(&chunk);
    if (!entry.end_of_sequence()) continue;
    Unpack(std::move(info), chunks);
    info = nullptr;
    chunks.clear();
  }
  return 0;
}
