// Fuzzes DecodeInsertRequest (cc/wire/insert_request.h), the server's parser
// of every InsertStream message, and through it Chunk::Parse and the wire
// reader. The input arrives as gRPC slices of up to 700 bytes (both copied
// and referenced ones). What the decoder accepts, protobuf must parse as the
// same request: the same chunks (keys and contents), items and kept keys.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc/core/chunk.h"
#include "cc/wire/insert_request.h"
#include "fuzz/fuzz_check.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "reverb/cc/reverb_service.pb.h"

using deepmind::reverb::DecodedInsertRequest;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kSlice = 700;
  std::vector<grpc::Slice> slices;
  for (size_t offset = 0; offset < size; offset += kSlice) {
    slices.emplace_back(data + offset, std::min(kSlice, size - offset));
  }
  const grpc::ByteBuffer bytes(slices.data(), slices.size());
  DecodedInsertRequest decoded;
  if (!deepmind::reverb::DecodeInsertRequest(bytes, &decoded).ok()) return 0;

  deepmind::reverb::InsertStreamRequest request;
  FUZZ_CHECK(request.ParseFromArray(data, static_cast<int>(size)));
  FUZZ_CHECK(static_cast<int>(decoded.chunks.size()) == request.chunks_size());
  for (int i = 0; i < request.chunks_size(); ++i) {
    const auto& chunk = *decoded.chunks[i];
    FUZZ_CHECK(chunk.key() == request.chunks(i).chunk_key());
    FUZZ_CHECK(chunk.num_rows() >= 0 && chunk.num_columns() >= 0);
    FUZZ_CHECK(chunk.uncompressed_data_size() >= 1);
    FUZZ_CHECK(
        deepmind::reverb::fuzzing::Same(chunk.ToProto(), request.chunks(i)));
  }
  FUZZ_CHECK(static_cast<int>(decoded.items.size()) == request.items_size());
  for (int i = 0; i < request.items_size(); ++i) {
    FUZZ_CHECK(
        deepmind::reverb::fuzzing::Same(decoded.items[i], request.items(i)));
  }
  FUZZ_CHECK(std::vector<uint64_t>(request.keep_chunk_keys().begin(),
                                   request.keep_chunk_keys().end()) ==
             decoded.keep_chunk_keys);
  return 0;
}
