// Status assertions that print the status when they fail (Debian's Abseil
// predates absl/status/status_matchers.h):
//
//   ASSERT_OK(store.Put(job));                 // an absl::Status
//   EXPECT_OK(client.ListJobs()) << "while up"; // an absl::StatusOr<T>
//   ASSERT_OK_AND_ASSIGN(auto jobs, client.ListJobs());
//   EXPECT_THAT(store.Get("x"), StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(dir.Read("f"), StatusIs(absl::StatusCode::kPermissionDenied,
//                                       HasSubstr("is a link")));
//   EXPECT_THAT(dir.Size("f"), IsOkAndHolds(10));
//   EXPECT_THAT(stub->Get(&context, request, &reply),
//               StatusIs(grpc::StatusCode::PERMISSION_DENIED));
//   EXPECT_THAT(PlaceGang(workers, request), IsError());
#ifndef RINGMASTER_TESTING_STATUS_MATCHERS_H_
#define RINGMASTER_TESTING_STATUS_MATCHERS_H_

#include <utility>

#include <gmock/gmock.h>
#include <grpcpp/support/status.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::status_matchers {

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}
// gRPC's codes are absl's, number for number.
inline absl::Status StatusOf(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}
inline absl::StatusCode CodeOf(absl::StatusCode code) { return code; }
inline absl::StatusCode CodeOf(grpc::StatusCode code) {
  return static_cast<absl::StatusCode>(code);
}

// For EXPECT_PRED_FORMAT1: success when OK, else the expression and its
// status.
template <typename T>
::testing::AssertionResult IsOk(const char* expression, const T& value) {
  const absl::Status& status = StatusOf(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expression << " is " << status;
}

}  // namespace ringmaster::status_matchers

namespace ringmaster {

// An absl::Status, StatusOr or grpc::Status whose code is `code`, absl's
// or gRPC's (and whose message matches `message`).
MATCHER_P(StatusIs, code, "") {
  const absl::Status status = status_matchers::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return status.code() == status_matchers::CodeOf(code);
}
MATCHER_P2(StatusIs, code, message, "") {
  const absl::Status status = status_matchers::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return status.code() == status_matchers::CodeOf(code) &&
         ::testing::ExplainMatchResult(message, std::string(status.message()), result_listener);
}

// An absl::Status, StatusOr or grpc::Status that is not OK.
MATCHER(IsError, "") {
  const absl::Status status = status_matchers::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return !status.ok();
}

// An OK absl::StatusOr whose value matches `value`.
MATCHER_P(IsOkAndHolds, value, "") {
  if (!arg.ok()) {
    *result_listener << "whose status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(value, *arg, result_listener);
}

}  // namespace ringmaster

#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::ringmaster::status_matchers::IsOk, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::ringmaster::status_matchers::IsOk, expr)

#define RINGMASTER_TESTING_CONCAT_INNER(a, b) a##b
#define RINGMASTER_TESTING_CONCAT(a, b) RINGMASTER_TESTING_CONCAT_INNER(a, b)
// Declares or assigns `lhs` the value of the StatusOr `rexpr`; a failed
// assertion (returning from the test) when it is not OK.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                          \
  auto RINGMASTER_TESTING_CONCAT(status_or_, __LINE__) = (rexpr); \
  ASSERT_OK(RINGMASTER_TESTING_CONCAT(status_or_, __LINE__));     \
  lhs = std::move(RINGMASTER_TESTING_CONCAT(status_or_, __LINE__)).value()

#endif  // RINGMASTER_TESTING_STATUS_MATCHERS_H_
