// Helpers of the reactor tests: a real server on loopback, and raw streams
// to it over a plain gRPC channel, whose requests the tests encode
// themselves (as a stranger's client would) and whose responses they parse
// as protos.
#ifndef REVERB_TESTS_CC_SERVICE_STREAM_TEST_UTIL_H_
#define REVERB_TESTS_CC_SERVICE_STREAM_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cc/core/table.h"
#include "cc/service/server.h"
#include "cc/wire/insert_request.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "reverb/cc/reverb_service.pb.h"
#include "tests/cc/server_test_util.h"
#include "tests/cc/test_util.h"

namespace deepmind::reverb::testing {

// Every stream gets this deadline, so that a server that fails to answer
// fails the test instead of hanging it.
inline constexpr absl::Duration kStreamDeadline = absl::Seconds(60);

// A message whose bytes the caller chose.
inline grpc::ByteBuffer Bytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// An item of `table` whose single column reads the first row of each chunk
// in turn (chunks as MakeChunkData makes them).
inline PrioritizedItem ItemOf(uint64_t key, const std::string& table,
                              const std::vector<uint64_t>& chunk_keys,
                              double priority = 1.0) {
  std::vector<std::shared_ptr<Chunk>> chunks;
  for (uint64_t chunk_key : chunk_keys) chunks.push_back(MakeChunk(chunk_key));
  PrioritizedItem item = MakeItem(key, priority, std::move(chunks)).item;
  item.set_table(table);
  return item;
}

// An InsertStreamRequest as our writers encode it (EncodeInsertRequest),
// with a chunk of MakeChunkData for each of `chunk_keys`.
inline grpc::ByteBuffer InsertRequest(
    const std::vector<uint64_t>& chunk_keys,
    const std::vector<PrioritizedItem>& items,
    const std::vector<uint64_t>& keep_chunk_keys) {
  std::vector<std::shared_ptr<const ChunkData>> chunks;
  for (uint64_t key : chunk_keys) {
    chunks.push_back(std::make_shared<const ChunkData>(MakeChunkData(key)));
  }
  InsertStreamRequest request;
  for (const PrioritizedItem& item : items) *request.add_items() = item;
  for (uint64_t key : keep_chunk_keys) request.add_keep_chunk_keys(key);
  return EncodeInsertRequest(request, chunks);
}

inline grpc::ByteBuffer SampleRequest(const std::string& table,
                                      int64_t num_samples,
                                      std::optional<int64_t> timeout_ms = {}) {
  SampleStreamRequest request;
  request.set_table(table);
  request.set_num_samples(num_samples);
  if (timeout_ms.has_value()) {
    request.mutable_rate_limiter_timeout()->set_milliseconds(*timeout_ms);
  }
  return Bytes(request.SerializeAsString());
}

// A stream whose requests are raw bytes and whose responses are parsed.
template <typename Response>
using RawStream = grpc::ClientReaderWriter<grpc::ByteBuffer, Response>;

// A call of a stream, with its context.
template <typename Response>
struct Call {
  grpc::ClientContext context;
  std::unique_ptr<RawStream<Response>> stream;
};

// Finishes `call` and expects it to have ended with `code` and a message
// that starts with `message`.
template <typename Response>
void ExpectFinishesWith(Call<Response>& call, grpc::StatusCode code,
                        const std::string& message) {
  const grpc::Status status = call.stream->Finish();
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_TRUE(absl::StartsWith(status.error_message(), message))
      << status.error_message();
}

// Starts a server over the tables of each test and opens raw streams to it.
class StreamTest : public ServerTest {
 protected:
  void StartServer(std::vector<std::shared_ptr<Table>> tables) {
    ServerTest::StartServer(std::move(tables));
    if (HasFatalFailure()) return;
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ = grpc::CreateCustomChannel(
        Address(server_->port()), grpc::InsecureChannelCredentials(), args);
  }

  // Waits until `table` is referenced `count` times. A reactor that has
  // read a request holds its table until it is deleted, so this tells when
  // the server has taken a request, or let go of a stream.
  static void AwaitUseCount(const std::shared_ptr<Table>& table, long count) {
    WaitFor([&] { return table.use_count() == count; }, absl::Seconds(30));
    ASSERT_EQ(table.use_count(), count);
  }

  std::unique_ptr<Call<InsertStreamResponse>> OpenInsertStream() {
    return Open<InsertStreamResponse>(insert_stream_);
  }
  std::unique_ptr<Call<SampleStreamResponse>> OpenSampleStream() {
    return Open<SampleStreamResponse>(sample_stream_);
  }

  std::shared_ptr<grpc::Channel> channel_;

 private:
  template <typename Response>
  std::unique_ptr<Call<Response>> Open(
      const grpc::internal::RpcMethod& method) {
    auto call = std::make_unique<Call<Response>>();
    call->context.set_deadline(
        absl::ToChronoTime(absl::Now() + kStreamDeadline));
    call->stream.reset(grpc::internal::ClientReaderWriterFactory<
                       grpc::ByteBuffer, Response>::Create(channel_.get(),
                                                           method,
                                                           &call->context));
    return call;
  }

  const grpc::internal::RpcMethod insert_stream_{
      "/deepmind.reverb.ReverbService/InsertStream",
      grpc::internal::RpcMethod::BIDI_STREAMING};
  const grpc::internal::RpcMethod sample_stream_{
      "/deepmind.reverb.ReverbService/SampleStream",
      grpc::internal::RpcMethod::BIDI_STREAMING};
};

}  // namespace deepmind::reverb::testing

#endif  // REVERB_TESTS_CC_SERVICE_STREAM_TEST_UTIL_H_
