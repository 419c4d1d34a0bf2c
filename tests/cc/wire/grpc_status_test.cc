#include "cc/wire/grpc_status.h"

#include <string>

#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

// Every error code: the same numbers in absl and gRPC.
constexpr absl::StatusCode kErrorCodes[] = {
    absl::StatusCode::kCancelled,          absl::StatusCode::kUnknown,
    absl::StatusCode::kInvalidArgument,    absl::StatusCode::kDeadlineExceeded,
    absl::StatusCode::kNotFound,           absl::StatusCode::kAlreadyExists,
    absl::StatusCode::kPermissionDenied,   absl::StatusCode::kResourceExhausted,
    absl::StatusCode::kFailedPrecondition, absl::StatusCode::kAborted,
    absl::StatusCode::kOutOfRange,         absl::StatusCode::kUnimplemented,
    absl::StatusCode::kInternal,           absl::StatusCode::kUnavailable,
    absl::StatusCode::kDataLoss,           absl::StatusCode::kUnauthenticated};

TEST(GrpcStatusTest, OkConvertsToOkBothWays) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, ErrorsKeepTheirCodeAndMessageBothWays) {
  const grpc::StatusCode grpc_codes[] = {grpc::StatusCode::CANCELLED,
                                         grpc::StatusCode::UNKNOWN,
                                         grpc::StatusCode::INVALID_ARGUMENT,
                                         grpc::StatusCode::DEADLINE_EXCEEDED,
                                         grpc::StatusCode::NOT_FOUND,
                                         grpc::StatusCode::ALREADY_EXISTS,
                                         grpc::StatusCode::PERMISSION_DENIED,
                                         grpc::StatusCode::RESOURCE_EXHAUSTED,
                                         grpc::StatusCode::FAILED_PRECONDITION,
                                         grpc::StatusCode::ABORTED,
                                         grpc::StatusCode::OUT_OF_RANGE,
                                         grpc::StatusCode::UNIMPLEMENTED,
                                         grpc::StatusCode::INTERNAL,
                                         grpc::StatusCode::UNAVAILABLE,
                                         grpc::StatusCode::DATA_LOSS,
                                         grpc::StatusCode::UNAUTHENTICATED};
  for (int i = 0; i < 16; ++i) {
    const std::string message = "error " + std::to_string(i) + ": \xc3\xa9!";
    const absl::Status status(kErrorCodes[i], message);
    const grpc::Status grpc_status = ToGrpcStatus(status);
    EXPECT_EQ(grpc_status.error_code(), grpc_codes[i]) << status;
    EXPECT_EQ(grpc_status.error_message(), message);

    const absl::Status back =
        FromGrpcStatus(grpc::Status(grpc_codes[i], message));
    EXPECT_EQ(back.code(), kErrorCodes[i]) << back;
    EXPECT_EQ(back.message(), message);
    EXPECT_EQ(FromGrpcStatus(grpc_status), status);
  }
}

TEST(GrpcStatusTest, AnErrorWithoutAMessageStaysAnError) {
  const grpc::Status grpc_status =
      ToGrpcStatus(absl::Status(absl::StatusCode::kInternal, ""));
  EXPECT_EQ(grpc_status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(grpc_status.error_message().empty());
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::ABORTED, "")).code(),
            absl::StatusCode::kAborted);
}

TEST(GrpcStatusTest, RemovedStreamBecomesUnavailable) {
  const absl::Status removed =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNKNOWN, "Stream removed"));
  EXPECT_EQ(removed.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(removed.message(), "Stream removed");
  EXPECT_TRUE(IsTransientError(removed));
  // Only UNKNOWN is rewritten, and only for that message.
  const absl::Status other =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNKNOWN, "Something else"));
  EXPECT_EQ(other.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(other.message(), "Something else");
  EXPECT_EQ(
      FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "Stream removed"))
          .code(),
      absl::StatusCode::kInternal);
}

TEST(GrpcStatusTest, OnlyUnavailableAndCancelledAreTransient) {
  EXPECT_FALSE(IsTransientError(absl::OkStatus()));
  for (absl::StatusCode code : kErrorCodes) {
    EXPECT_EQ(IsTransientError(absl::Status(code, "x")),
              code == absl::StatusCode::kUnavailable ||
                  code == absl::StatusCode::kCancelled)
        << absl::StatusCodeToString(code);
  }
}

}  // namespace
}  // namespace deepmind::reverb
