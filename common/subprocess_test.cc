#include "common/subprocess.h"

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

TEST(RunToCompletionTest, GivesTheOutputAndTheExitCode) {
  ASSERT_OK_AND_ASSIGN(
      ToolRun run,
      RunToCompletion({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, {}, absl::Seconds(30)));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.output, "out\nerr\n");
  EXPECT_FALSE(run.timed_out);
  EXPECT_FALSE(run.cancelled);
}

TEST(RunToCompletionTest, ATickThatSaysStopKillsTheToolAndItsChildren) {
  int ticks = 0;
  const absl::Time start = absl::Now();
  // The shell's child holds the output pipe open: only killing the group
  // ends the run.
  ASSERT_OK_AND_ASSIGN(
      ToolRun run, RunToCompletion(
                       {"/bin/sh", "-c", "sleep 60; echo never"}, {}, absl::Seconds(60), 1 << 16,
                       [&] { return ++ticks < 3; }, absl::Milliseconds(10)));
  EXPECT_TRUE(run.cancelled);
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, -1);
  EXPECT_EQ(ticks, 3);
  EXPECT_EQ(run.output, "");
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

TEST(RunToCompletionTest, ATimeoutKillsTheTool) {
  ASSERT_OK_AND_ASSIGN(ToolRun run,
                       RunToCompletion({"/bin/sh", "-c", "sleep 60"}, {}, absl::Milliseconds(50)));
  EXPECT_TRUE(run.timed_out);
  EXPECT_EQ(run.exit_code, -1);
}

}  // namespace
}  // namespace ringmaster
