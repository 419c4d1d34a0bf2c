// InitializeConnection as a client speaks it on the wire: which requests
// are handed a table's address and which get address 0.
#include <unistd.h>

#include <memory>

#include "cc/client/connection.h"
#include "cc/core/local_table.h"
#include "cc/rate_limiters/presets.h"
#include "cc/service/initialize_connection_reactor.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/cc/server_test_util.h"

namespace deepmind::reverb {
namespace {

class InitializeConnectionTest : public testing::ConnectedServerTest {
 protected:
  void SetUp() override {
    table_ = testing::FifoTable("table", *MinSizeRateLimiter(1));
    StartServer({table_});
  }

  // Opens the call and sends `request`.
  std::unique_ptr<grpc::ClientReaderWriterInterface<
      InitializeConnectionRequest, InitializeConnectionResponse>>
  Open(grpc::ClientContext* context,
       const InitializeConnectionRequest& request) {
    context->set_wait_for_ready(true);
    auto stream = connection_->stub()->InitializeConnection(context);
    EXPECT_TRUE(stream->Write(request));
    return stream;
  }

  static InitializeConnectionRequest Request(int64_t pid, bool marked,
                                             const std::string& table) {
    InitializeConnectionRequest request;
    request.set_pid(pid);
    request.set_table_name(table);
    if (marked) request.set_libreverb_identity(LibreverbIdentity());
    return request;
  }

  std::shared_ptr<Table> table_;
};

TEST_F(InitializeConnectionTest, OurClientInThisProcessIsHandedTheTable) {
  grpc::ClientContext context;
  auto stream = Open(&context, Request(getpid(), true, "table"));
  InitializeConnectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_NE(response.address(), 0);
  const auto* handle =
      reinterpret_cast<const LocalTableHandle*>(response.address());
  EXPECT_EQ(handle->identity, LibreverbIdentity());
  EXPECT_EQ(handle->table, table_);
  InitializeConnectionRequest transferred;
  transferred.set_ownership_transferred(true);
  EXPECT_TRUE(stream->Write(transferred));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(InitializeConnectionTest, RequestWithoutMarkerGetsAddressZero) {
  // What dm-reverb's client sends: it could not use our Table.
  grpc::ClientContext context;
  auto stream = Open(&context, Request(getpid(), false, "table"));
  InitializeConnectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.address(), 0);
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(InitializeConnectionTest, OtherProcessGetsAddressZero) {
  grpc::ClientContext context;
  auto stream = Open(&context, Request(getpid() + 1, true, "table"));
  InitializeConnectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.address(), 0);
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(InitializeConnectionTest, UnknownTableIsNotFound) {
  grpc::ClientContext context;
  auto stream = Open(&context, Request(getpid(), true, "nope"));
  InitializeConnectionResponse response;
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Priority table nope was not found");
}

TEST_F(InitializeConnectionTest, SecondRequestMustTransferOwnership) {
  grpc::ClientContext context;
  auto stream = Open(&context, Request(getpid(), true, "table"));
  InitializeConnectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_NE(response.address(), 0);
  EXPECT_TRUE(stream->Write(Request(getpid(), true, "table")));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INTERNAL);
}

TEST(IsLocalhostOrInProcessTest, ServesLoopbackAndInProcessPeersOnly) {
  using R = InitializeConnectionReactor;
  EXPECT_TRUE(R::IsLocalhostOrInProcess("ipv4:127.0.0.1:5000"));
  EXPECT_TRUE(R::IsLocalhostOrInProcess("ipv6:[::1]:5000"));
  EXPECT_TRUE(R::IsLocalhostOrInProcess("unknown"));
  EXPECT_TRUE(R::IsLocalhostOrInProcess(""));
  EXPECT_FALSE(R::IsLocalhostOrInProcess("ipv4:10.0.0.7:5000"));
  EXPECT_FALSE(R::IsLocalhostOrInProcess("ipv6:[2001:db8::7]:5000"));
}

}  // namespace
}  // namespace deepmind::reverb
