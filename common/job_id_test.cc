#include "common/job_id.h"
#include "testing/status_matchers.h"

#include <string>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(JobIdTest, AcceptsIdsTheCoordinatorMakes) {
  EXPECT_OK(ValidateJobId("demo-digits-1"));
  EXPECT_OK(ValidateJobId("7"));
  EXPECT_OK(ValidateJobId(std::string(63, 'a')));
}

TEST(JobIdTest, RefusesPathsAndAnythingElse) {
  const std::string nul("a\0b", 3);
  for (const std::string& id :
       {std::string("../../../secret"), std::string("..%2F..%2Fsecret"), std::string("/etc"),
        std::string("a/b"), nul, std::string(""), std::string("-a"), std::string("Demo-1"),
        std::string("a_b"), std::string("a b"), std::string(64, 'a'), std::string(".")}) {
    absl::Status status = ValidateJobId(id);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument)) << id;
  }
}

TEST(JobIdTest, TheErrorNamesTheIdEscaped) {
  EXPECT_EQ(ValidateJobId(std::string("a\0/", 3)).message(),
            "job id \"a\\x00/\" is not valid: ids are 1-63 lowercase letters, digits or '-', "
            "starting with a letter or digit");
  EXPECT_EQ(ValidateRankRef("job-1", -1).message(), "rank -1 is negative");
  EXPECT_OK(ValidateRankRef("job-1", 0));
}

}  // namespace
}  // namespace ringmaster
