#include "coordinator/core/goodput.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

absl::Time At(double seconds) {
  return absl::FromUnixSeconds(1'800'000'000) + absl::Seconds(seconds);
}

double Lost(const v1::Goodput& g, const char* cause) {
  auto it = g.lost_seconds().find(cause);
  return it == g.lost_seconds().end() ? 0 : it->second;
}

// A job of the built-in trainer, which reports its steps.
v1::Job TrainerJob() {
  v1::Job job;
  job.mutable_spec()->mutable_trainer()->set_epochs(1);
  return job;
}

// Wall time is productive time plus every cause of loss.
void ExpectWhole(const v1::Goodput& g) {
  double lost = 0;
  for (const auto& [cause, seconds] : g.lost_seconds()) lost += seconds;
  EXPECT_NEAR(g.wall_seconds(), g.productive_seconds() + lost, 1e-6);
}

TEST(GoodputTest, WallTimeBeginsAtTheFirstStartAndStartupIsLost) {
  v1::Job job = TrainerJob();
  GoodputOnTransition(&job, v1::PENDING, v1::SUBMITTED, At(0));
  EXPECT_EQ(GoodputAt(job, At(10)).wall_seconds(), 0) << "waiting to be placed the first time";
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(10));
  GoodputOnTransition(&job, v1::RUNNING, v1::RANKS_RUNNING, At(11));
  GoodputOnFirstStep(&job, 1, At(12));
  const v1::Goodput g = GoodputAt(job, At(112));
  EXPECT_DOUBLE_EQ(g.wall_seconds(), 102);
  EXPECT_DOUBLE_EQ(g.productive_seconds(), 100);
  EXPECT_DOUBLE_EQ(Lost(g, kLostStartup), 2);
  EXPECT_DOUBLE_EQ(g.ratio(), 100.0 / 102);
  ExpectWhole(g);
}

TEST(GoodputTest, AProgramThatReportsNoStepIsProductiveOnceAllItsRanksRun) {
  v1::Job job;
  job.mutable_spec()->add_command("train.py");
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(0));
  GoodputOnTransition(&job, v1::RUNNING, v1::RANKS_RUNNING, At(3));
  const v1::Goodput g = GoodputAt(job, At(13));
  EXPECT_DOUBLE_EQ(Lost(g, kLostStartup), 3);
  EXPECT_DOUBLE_EQ(g.productive_seconds(), 10);
}

TEST(GoodputTest, AFailureCostsTheRestartAndTheStepsRedone) {
  v1::Job job = TrainerJob();
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(0));
  GoodputOnFirstStep(&job, 1, At(0));
  // 1000 steps in 100 s, then a rank is killed.
  GoodputOnTransition(&job, v1::RESTARTING, v1::RANK_SIGNALED, At(100));
  GoodputOnTransition(&job, v1::PENDING, v1::RESTART_BACKOFF_DONE, At(101));
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(101.5));
  GoodputOnResume(&job, /*steps_redone=*/50, /*reached=*/1001);
  GoodputOnFirstStep(&job, 952, At(103));
  const v1::Goodput g = GoodputAt(job, At(203));
  EXPECT_DOUBLE_EQ(Lost(g, kLostRestart), 3);
  EXPECT_DOUBLE_EQ(Lost(g, kLostRedone), 5);  // 50 steps of 0.1 s
  EXPECT_DOUBLE_EQ(g.productive_seconds(), 195);
  EXPECT_DOUBLE_EQ(g.wall_seconds(), 203);
  ExpectWhole(g);
}

TEST(GoodputTest, APreemptionsWaitIsPendingAndItsStartIsStartup) {
  v1::Job job = TrainerJob();
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(0));
  GoodputOnFirstStep(&job, 1, At(1));
  GoodputOnTransition(&job, v1::RESTARTING, v1::PREEMPTED, At(11));
  GoodputOnTransition(&job, v1::PENDING, v1::RESTART_BACKOFF_DONE, At(12));
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(71));
  GoodputOnFirstStep(&job, 100, At(73));
  const v1::Goodput g = GoodputAt(job, At(83));
  EXPECT_DOUBLE_EQ(Lost(g, kLostPending), 60);
  EXPECT_DOUBLE_EQ(Lost(g, kLostStartup), 1 + 2);
  EXPECT_DOUBLE_EQ(Lost(g, kLostRestart), 0);
  EXPECT_DOUBLE_EQ(g.productive_seconds(), 20);
  ExpectWhole(g);
}

TEST(GoodputTest, CheckpointStallsComeOutOfProductiveTime) {
  v1::Job job = TrainerJob();
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(0));
  GoodputOnFirstStep(&job, 1, At(0));
  GoodputOnStall(&job, 1.5, At(30));
  GoodputOnStall(&job, 1.5, At(40));  // the same report again: nothing new
  GoodputOnStall(&job, 2.0, At(50));
  const v1::Goodput g = GoodputAt(job, At(60));
  EXPECT_DOUBLE_EQ(Lost(g, kLostCheckpointStall), 2.0);
  EXPECT_DOUBLE_EQ(g.productive_seconds(), 58);
  ExpectWhole(g);
}

TEST(GoodputTest, AnEndedJobsWallTimeStops) {
  v1::Job job = TrainerJob();
  GoodputOnTransition(&job, v1::STARTING, v1::SCHEDULED, At(0));
  GoodputOnFirstStep(&job, 1, At(1));
  GoodputOnTransition(&job, v1::SUCCEEDED, v1::RANKS_SUCCEEDED, At(11));
  EXPECT_DOUBLE_EQ(GoodputAt(job, At(1000)).wall_seconds(), 11);
  EXPECT_DOUBLE_EQ(GoodputAt(job, At(1000)).ratio(), 10.0 / 11);
  // A job cancelled before it ever started has no wall time.
  v1::Job never;
  GoodputOnTransition(&never, v1::CANCELLED, v1::CANCEL_REQUESTED, At(5));
  EXPECT_EQ(GoodputAt(never, At(10)).wall_seconds(), 0);
  EXPECT_EQ(GoodputAt(never, At(10)).ratio(), 0);
}

}  // namespace
}  // namespace ringmaster
