// Status assertions that print the status when they fail (Debian's Abseil
// predates absl/status/status_matchers.h):
//
//   ASSERT_OK(store.Put(job));                 // an absl::Status
//   EXPECT_OK(client.ListJobs()) << "while up"; // an absl::StatusOr<T>
//   ASSERT_OK_AND_ASSIGN(auto jobs, client.ListJobs());
#ifndef RINGMASTER_TESTING_STATUS_MATCHERS_H_
#define RINGMASTER_TESTING_STATUS_MATCHERS_H_

#include <utility>

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
