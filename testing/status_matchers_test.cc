#include "testing/status_matchers.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>

namespace ringmaster {
namespace {

absl::StatusOr<std::string> Named(bool ok) {
  if (!ok) return absl::NotFoundError("no such job");
  return std::string("job-1");
}

TEST(StatusMatchersTest, PassOnOk) {
  EXPECT_OK(absl::OkStatus());
  ASSERT_OK(Named(true));
  ASSERT_OK_AND_ASSIGN(const std::string name, Named(true));
  EXPECT_EQ(name, "job-1");
}

// A failure names the expression and prints its status.
TEST(StatusMatchersTest, AFailurePrintsTheStatus) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(absl::InternalError("boom")),
                          "absl::InternalError(\"boom\") is INTERNAL: boom");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Named(false)), "Named(false) is NOT_FOUND: no such job");
  EXPECT_FATAL_FAILURE(
      {
        ASSERT_OK_AND_ASSIGN(const std::string name, Named(false));
        (void)name;
      },
      "NOT_FOUND: no such job");
}

TEST(StatusMatchersTest, StatusIsAndIsOkAndHoldsMatchCodeMessageAndValue) {
  EXPECT_THAT(Named(false), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Named(false), StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("job")));
  EXPECT_THAT(absl::OkStatus(), StatusIs(absl::StatusCode::kOk));
  EXPECT_THAT(Named(true), IsOkAndHolds(std::string("job-1")));
  EXPECT_THAT(Named(false), ::testing::Not(IsOkAndHolds(std::string("job-1"))));
  EXPECT_THAT(Named(false), ::testing::Not(StatusIs(absl::StatusCode::kInternal)));
  EXPECT_THAT(Named(false),
              ::testing::Not(StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("nope"))));
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(Named(false), StatusIs(absl::StatusCode::kInternal)),
                          "whose status is NOT_FOUND: no such job");
}

}  // namespace
}  // namespace ringmaster
