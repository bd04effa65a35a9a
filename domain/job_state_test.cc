#include "domain/job_state.h"
#include "testing/status_matchers.h"

#include <set>
#include <utility>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

using v1::JobState;

const JobState kAll[] = {v1::JOB_STATE_UNSPECIFIED,
                         v1::PENDING,
                         v1::STARTING,
                         v1::RUNNING,
                         v1::SUCCEEDED,
                         v1::FAILED,
                         v1::CANCELLED,
                         v1::RESTARTING};

TEST(JobStateTest, ExactlyTheDocumentedTransitionsAreLegal) {
  const std::set<std::pair<JobState, JobState>> legal = {
      {v1::PENDING, v1::STARTING},   {v1::PENDING, v1::CANCELLED},    {v1::PENDING, v1::FAILED},
      {v1::STARTING, v1::RUNNING},   {v1::STARTING, v1::RESTARTING},  {v1::STARTING, v1::FAILED},
      {v1::STARTING, v1::CANCELLED}, {v1::RUNNING, v1::SUCCEEDED},    {v1::RUNNING, v1::RESTARTING},
      {v1::RUNNING, v1::FAILED},     {v1::RUNNING, v1::CANCELLED},    {v1::RESTARTING, v1::PENDING},
      {v1::RESTARTING, v1::FAILED},  {v1::RESTARTING, v1::CANCELLED},
  };
  for (JobState from : kAll) {
    for (JobState to : kAll) {
      const bool want = legal.count({from, to}) > 0;
      EXPECT_EQ(IsLegalTransition(from, to), want) << StateName(from) << " -> " << StateName(to);
      EXPECT_EQ(CheckTransition(from, to).ok(), want);
    }
  }
}

TEST(JobStateTest, TerminalStatesHaveNoWayOut) {
  for (JobState from : {v1::SUCCEEDED, v1::FAILED, v1::CANCELLED}) {
    EXPECT_TRUE(IsTerminal(from));
    for (JobState to : kAll) EXPECT_FALSE(IsLegalTransition(from, to));
  }
  for (JobState s : {v1::PENDING, v1::STARTING, v1::RUNNING, v1::RESTARTING}) {
    EXPECT_FALSE(IsTerminal(s));
  }
}

TEST(JobStateTest, IllegalTransitionNamesBothStates) {
  absl::Status status = CheckTransition(v1::SUCCEEDED, v1::RUNNING);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(status.message().find("SUCCEEDED"), std::string::npos);
  EXPECT_NE(status.message().find("RUNNING"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster
