// Fuzzes Chunk::Parse (cc/core/chunk.h), which reads a ChunkData's header
// and checks its tensors without copying their contents (in place for the
// form writers send, else by protobuf), over fragmented input. What it
// accepts, protobuf must parse as the same chunk.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cc/core/chunk.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "reverb/cc/schema.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto chunk = deepmind::reverb::Chunk::Parse(
      deepmind::reverb::fuzzing::FragmentedCord(data, size));
  if (!chunk.ok()) return 0;
  deepmind::reverb::ChunkData proto;
  FUZZ_CHECK(proto.ParseFromArray(data, static_cast<int>(size)));
  FUZZ_CHECK((*chunk)->key() == proto.chunk_key());
  FUZZ_CHECK((*chunk)->episode_id() == proto.sequence_range().episode_id());
  FUZZ_CHECK((*chunk)->DataByteSizeLong() == size);
  FUZZ_CHECK((*chunk)->num_rows() >= 0 && (*chunk)->num_columns() >= 0);
  // The fields Chunk keeps, whichever way it read them (in place or by
  // protobuf), as protobuf reads them.
  const int64_t rows = int64_t{proto.sequence_range().end()} -
                       proto.sequence_range().start() + 1;
  FUZZ_CHECK((*chunk)->num_rows() == std::clamp<int64_t>(rows, 0, INT32_MAX));
  FUZZ_CHECK((*chunk)->num_columns() == (proto.data_tensors_len() > 0
                                             ? proto.data_tensors_len()
                                             : proto.data().tensors_size()));
  FUZZ_CHECK((*chunk)->uncompressed_data_size() ==
             std::max<int64_t>(1, proto.data_uncompressed_size()));
  FUZZ_CHECK(deepmind::reverb::fuzzing::Same((*chunk)->ToProto(), proto));
  return 0;
}
