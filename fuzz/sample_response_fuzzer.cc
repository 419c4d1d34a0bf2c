// Fuzzes the client's reading of SampleStream responses from a hostile or
// broken server: the input is one SampleStreamResponse on the wire, arriving
// as gRPC slices of up to 700 bytes, decoded as SampleStream decodes it
// (DecodeSampleResponse, cc/wire/sample_response.h: what it accepts,
// protobuf must parse as the same response, the contents it leaves apart
// included), whose entries are gathered into samples as
// SampleStream::ReadPacked gathers them (cc/client/sample_stream.cc: an
// entry with info starts the sample's info, every entry adds its chunks,
// end_of_sequence ends it, the slices of trimmed chunks are moved by their
// first_row, cc/wire/chunk_rows.h) and unpacked (UnpackSample,
// cc/client/sample.h),
// then split into timesteps as the timestep datasets do. Anything may fail
// with a status; nothing may crash, and what unpacks must be consistent
// with the item it came from.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cc/client/sample.h"
#include "cc/wire/chunk_rows.h"
#include "cc/wire/sample_response.h"
#include "fuzz/fuzz_check.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "reverb/cc/reverb_service.pb.h"

namespace deepmind::reverb {
namespace {

void Unpack(std::shared_ptr<const SampleInfo> info,
            const std::vector<const ChunkData*>& chunks,
            const std::vector<const ChunkContents*>& contents) {
  auto sample = UnpackSample(info, chunks, contents);
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

// `chunk` with the contents held apart put back, as protobuf parses it.
ChunkData Whole(const ChunkData& chunk, const ChunkContents* contents) {
  ChunkData whole = chunk;
  if (contents == nullptr) return whole;
  FUZZ_CHECK(static_cast<int>(contents->views.size()) ==
             whole.data().tensors_size());
  for (int i = 0; i < whole.data().tensors_size(); ++i) {
    FUZZ_CHECK(whole.data().tensors(i).tensor_content().empty());
    const bool in_pieces = i < static_cast<int>(contents->pieces.size()) &&
                           contents->pieces[i] != nullptr;
    const std::string content = in_pieces ? std::string(*contents->pieces[i])
                                          : std::string(contents->views[i]);
    FUZZ_CHECK(!in_pieces || contents->views[i].empty());
    if (!content.empty()) {
      whole.mutable_data()->mutable_tensors(i)->set_tensor_content(content);
    }
  }
  return whole;
}

}  // namespace
}  // namespace deepmind::reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepmind::reverb;  // NOLINT(build/namespaces)
  constexpr size_t kSlice = 700;
  std::vector<grpc::Slice> slices;
  for (size_t offset = 0; offset < size; offset += kSlice) {
    slices.emplace_back(data + offset, std::min(kSlice, size - offset));
  }
  const grpc::ByteBuffer bytes(slices.data(), slices.size());
  auto response = std::make_shared<SampleStreamResponse>();
  HeldChunkContents held;
  if (!DecodeSampleResponse(
           bytes, response.get(),
           [&held](const ChunkData* chunk, std::vector<absl::Cord> contents) {
             held.Hold(chunk, std::move(contents));
           })
           .ok()) {
    return 0;
  }
  SampleStreamResponse parsed;
  FUZZ_CHECK(parsed.ParseFromArray(data, static_cast<int>(size)));
  FUZZ_CHECK(response->entries_size() == parsed.entries_size());
  std::shared_ptr<const SampleInfo> info;
  SampleInfo* editable = nullptr;  // `info`, as ReadPacked edits it.
  std::vector<const ChunkData*> chunks;
  std::vector<const ChunkContents*> contents;
  for (int e = 0; e < response->entries_size(); ++e) {
    const auto& entry = response->entries(e);
    const auto& expected = parsed.entries(e);
    FUZZ_CHECK(entry.data_size() == expected.data_size());
    FUZZ_CHECK(fuzzing::Same(entry.info(), expected.info()));
    FUZZ_CHECK(entry.end_of_sequence() == expected.end_of_sequence());
    if (entry.has_info()) {
      editable = response->mutable_entries(e)->mutable_info();
      info = std::shared_ptr<const SampleInfo>(response, editable);
    }
    for (int c = 0; c < entry.data_size(); ++c) {
      const ChunkData& chunk = entry.data(c);
      auto it = held.contents.find(&chunk);
      const ChunkContents* apart =
          it == held.contents.end() ? nullptr : &it->second;
      FUZZ_CHECK(fuzzing::Same(Whole(chunk, apart), expected.data(c)));
      chunks.push_back(&chunk);
      contents.push_back(apart);
    }
    if (!entry.end_of_sequence()) continue;
    if (editable != nullptr) {
      UntrimSlices(chunks, editable->mutable_item()->mutable_flat_trajectory());
    }
    Unpack(std::move(info), chunks, contents);
    info = nullptr;
    editable = nullptr;
    chunks.clear();
    contents.clear();
  }
  return 0;
}
