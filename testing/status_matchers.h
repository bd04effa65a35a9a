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
#ifndef RINGMASTER_TESTING_STATUS_MATCHERS_H_
#define RINGMASTER_TESTING_STATUS_MATCHERS_H_

#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::status_matchers {

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
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

// An absl::Status or StatusOr whose code is `code` (and whose message
// matches `message`).
MATCHER_P(StatusIs, code, "") {
  const absl::Status& status = status_matchers::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code;
}
MATCHER_P2(StatusIs, code, message, "") {
  const absl::Status& status = status_matchers::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code &&
         ::testing::ExplainMatchResult(message, std::string(status.message()), result_listener);
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
