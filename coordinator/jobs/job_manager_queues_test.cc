// JobManager with queues and priorities, on a fake clock: admission at
// submit, preemption end to end (SIGTERM with the victim's grace, back to
// PENDING, no restart counted, placed again after its preemptor), and
// queues replaced while running.
#include <gtest/gtest.h>

#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

class JobManagerQueuesTest : public JobManagerTest {
 protected:
  v1::JobSpec Spec(const std::string& name, int ranks, const std::string& priority,
                   const std::string& queue = "") {
    v1::JobSpec spec;
    spec.set_name(name);
    spec.set_ranks(ranks);
    spec.add_command("true");
    spec.set_priority(priority);
    spec.set_queue(queue);
    return spec;
  }
  // A "high" job preempts `low`, the only job on `w1`, runs there and ends;
  // `low` is placed again and starts its next attempt. The preemption's
  // history message.
  std::string PreemptedAndBack(TestWorker& w1, const std::string& low, int* attempt) {
    const std::string high = Submit(Spec("high", 1, "high"));
    EXPECT_EQ(Job(low).state(), v1::RESTARTING);
    const std::string said = Last(low).message();
    Exited(w1, low, *attempt, 0, 143, /*stopped=*/true);
    Pass(absl::Seconds(1));
    Started(w1, high, 0, 0);
    Exited(w1, high, 0, 0, 0);
    Pass(absl::Seconds(1));
    EXPECT_EQ(Job(low).state(), v1::STARTING);
    Started(w1, low, ++*attempt, 0);
    return said;
  }
};

TEST_F(JobManagerQueuesTest, AHigherPriorityJobPreemptsAndTheVictimComesBackWithoutARestart) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  v1::JobSpec low_spec = Spec("low", 1, "low");
  low_spec.set_preemption_grace_s(45);
  const std::string low = Submit(low_spec);
  Started(w1, low, 0, 0);
  EXPECT_EQ(Job(low).state(), v1::RUNNING);
  Pass(absl::Minutes(5));  // past min_runtime
  w1.link.Take();

  const std::string high = Submit(Spec("high", 1, "high"));
  v1::Job victim = Job(low);
  EXPECT_EQ(victim.state(), v1::RESTARTING);
  EXPECT_EQ(Last(low).reason(), v1::PREEMPTED);
  EXPECT_EQ(Last(low).message().substr(0, 48),
            absl::StrCat("PREEMPTED by ", high, " (priority 1000, queue default)").substr(0, 48));
  EXPECT_EQ(victim.preemptions(), 1);
  std::vector<v1::StopJob> stops = StopsOf(w1);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].job_id(), low);
  EXPECT_EQ(stops[0].grace_ms(), 45000) << "the victim's preemption_grace_s";
  EXPECT_NE(Job(high).pending_reason().find("reserved for it"), std::string::npos)
      << Job(high).pending_reason();

  // The victim's rank checkpoints and exits on SIGTERM: the preemptor starts
  // on its slot, and the victim waits behind it without a restart counted.
  Exited(w1, low, 0, 0, 143, /*stopped=*/true);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(high).state(), v1::STARTING);
  victim = Job(low);
  EXPECT_EQ(victim.state(), v1::PENDING);
  EXPECT_EQ(victim.restarts(), 0);
  EXPECT_EQ(victim.attempt(), 1);
  EXPECT_NE(victim.pending_reason().find("1 job of higher priority ahead"), std::string::npos)
      << victim.pending_reason();

  // Once the preemptor is done, the victim runs again.
  Started(w1, high, 0, 0);
  Exited(w1, high, 0, 0, 0);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(low).state(), v1::STARTING);
}

TEST_F(JobManagerQueuesTest, ANonPreemptibleJobKeepsItsSlots) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  v1::JobSpec pinned = Spec("pinned", 1, "low");
  pinned.set_preemptible(false);
  const std::string low = Submit(pinned);
  Started(w1, low, 0, 0);
  Pass(absl::Minutes(5));
  const std::string high = Submit(Spec("high", 1, "high"));
  EXPECT_EQ(Job(low).state(), v1::RUNNING);
  EXPECT_EQ(Job(high).pending_reason(), "needs 1 free slots, 0 free on 1 alive workers");
}

TEST_F(JobManagerQueuesTest, SubmitRefusesAnUnknownQueueOrClassAndStoresNothing) {
  options_.queues =
      *ParseQueueConfig("queues:\n  - {name: research, users: [alice]}\n  - {name: default}\n");
  Restart();
  absl::StatusOr<std::string> unknown = manager_->Submit(Spec("a", 1, "", "gpu"), "", "alice");
  EXPECT_THAT(unknown.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<std::string> bad_class = manager_->Submit(Spec("a", 1, "urgent"), "", "alice");
  EXPECT_THAT(bad_class.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<std::string> not_hers = manager_->Submit(Spec("a", 1, "", "research"), "", "bob");
  EXPECT_THAT(not_hers.status(), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_TRUE(AllJobs().empty());

  // An integer priority is the admin's.
  EXPECT_THAT(manager_->Submit(Spec("a", 1, "250", "research"), "", "alice"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_TRUE(AllJobs().empty());
  absl::StatusOr<std::string> ok = manager_->Submit(Spec("a", 1, "250", "research"), "", "admin");
  ASSERT_OK(ok);
  v1::Job job = Job(*ok);
  EXPECT_EQ(job.spec().queue(), "research");
  EXPECT_EQ(job.priority(), 250);
  absl::StatusOr<std::string> defaulted = manager_->Submit(Spec("b", 1, ""), "", "bob");
  ASSERT_OK(defaulted);
  EXPECT_EQ(Job(*defaulted).spec().queue(), "default");
  EXPECT_EQ(Job(*defaulted).priority(), 100);
}

TEST_F(JobManagerQueuesTest, NewQueuesApplyToTheNextPass) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 4));
  manager_->SetQueues(*ParseQueueConfig("queues:\n  - {name: default, limit: {slots: 1}}\n"));
  const std::string first = Submit(Spec("a", 1, ""));
  const std::string second = Submit(Spec("b", 1, ""));
  EXPECT_EQ(Job(first).state(), v1::STARTING);
  EXPECT_EQ(Job(second).pending_reason(), "queue default at its limit (1 of 1 slots)");
  v1::ListQueuesResponse queues = manager_->ListQueues();
  ASSERT_EQ(queues.queues_size(), 1);
  EXPECT_EQ(queues.queues(0).in_use().slots(), 1);
  EXPECT_EQ(queues.queues(0).limit().slots(), 1);
  EXPECT_EQ(queues.queues(0).quota().slots(), 0);
  EXPECT_EQ(queues.queues(0).borrowed().slots(), 1);
  EXPECT_EQ(queues.queues(0).running_jobs(), 1);
  EXPECT_EQ(queues.queues(0).pending_jobs(), 1);
  EXPECT_EQ(queues.priority_classes().at("high"), 1000);
  manager_->SetQueues(DefaultQueueConfig());
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(second).state(), v1::STARTING);
}

// A user's jobs waiting are bounded, in all queues together and per queue:
// a submit over either is RESOURCE_EXHAUSTED naming the limit, and stores
// nothing. Running jobs and the admin's do not count.
TEST_F(JobManagerQueuesTest, AUsersPendingJobsAreBounded) {
  options_.max_pending_jobs_per_user = 3;
  options_.queues = *ParseQueueConfig(
      "queues:\n  - {name: default}\n  - {name: small, max_pending_jobs_per_user: 1}\n");
  Restart();
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(manager_->Submit(Spec("a", 1, ""), "", "bob"));  // runs
  manager_->Tick();
  for (int i = 0; i < 3; ++i) ASSERT_OK(manager_->Submit(Spec("b", 1, ""), "", "bob"));
  EXPECT_THAT(manager_->Submit(Spec("b", 1, ""), "", "bob"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "user bob has 3 jobs pending, the coordinator's "
                       "--max-pending-jobs-per-user (3); submit more once some start"));
  EXPECT_OK(manager_->Submit(Spec("c", 1, ""), "", "carol")) << "another user's own bound";
  EXPECT_OK(manager_->Submit(Spec("d", 1, ""), "", "admin"));
  ASSERT_OK(manager_->Submit(Spec("e", 1, "", "small"), "", "carol"));
  EXPECT_THAT(manager_->Submit(Spec("e", 1, "", "small"), "", "carol"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "user carol has 1 jobs pending in queue small, its "
                       "max_pending_jobs_per_user (1); submit more once some start"));
  EXPECT_EQ(AllJobs().size(), 7u);
}

// A job preempted max_preemptions_per_hour (3) times within the hour says
// so in the third preemption's history entry, and is not preempted again.
TEST_F(JobManagerQueuesTest, AJobIsPreemptedAtMostThreeTimesAnHourAndSaysSo) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string low = Submit(Spec("low", 1, "low"));
  int attempt = 0;
  Started(w1, low, attempt, 0);
  for (int i = 1; i <= 3; ++i) {
    Pass(absl::Minutes(5));  // past min_runtime
    const std::string said = PreemptedAndBack(w1, low, &attempt);
    EXPECT_EQ(said.find("not preempted again before") != std::string::npos, i == 3) << said;
  }
  std::string third;
  const v1::Job preempted = Job(low);
  for (const v1::StateChange& change : preempted.history()) {
    if (change.reason() == v1::PREEMPTED) third = change.message();
  }
  EXPECT_NE(third.find("; preempted 3 times within the hour, it is not preempted again before "),
            std::string::npos)
      << third;
  EXPECT_NE(third.find("(--max-preemptions-per-hour)"), std::string::npos) << third;
  Pass(absl::Minutes(5));
  const std::string waits = Submit(Spec("high", 1, "high"));
  EXPECT_EQ(Job(low).state(), v1::RUNNING);
  EXPECT_EQ(Job(low).preemptions(), 3);
  EXPECT_EQ(Job(waits).state(), v1::PENDING);
}

// Preempted every 20 minutes for four hours: its history folds the rounds
// (RESTARTING, PENDING, STARTING, RUNNING) into one entry that counts them,
// every preemption still adds up, and the hourly bound still holds.
TEST_F(JobManagerQueuesTest, APreemptionLoopOverHoursKeepsAShortHistory) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string low = Submit(Spec("low", 1, "low"));
  int attempt = 0;
  Started(w1, low, attempt, 0);
  for (int i = 1; i <= 12; ++i) {
    Pass(absl::Minutes(20));
    PreemptedAndBack(w1, low, &attempt);
  }
  const v1::Job looped = Job(low);
  EXPECT_EQ(looped.preemptions(), 12);
  EXPECT_LE(looped.history_size(), 14) << looped.DebugString();
  int counted = 0;
  for (int i = 0; i < looped.history_size(); ++i) {
    const v1::StateChange& change = looped.history(i);
    if (change.reason() == v1::PREEMPTED) ++counted;
    if (change.reason() != v1::HISTORY_FOLDED) continue;
    for (int j = i - change.fold_period(); j < i; ++j) {
      if (looped.history(j).reason() == v1::PREEMPTED) counted += change.folds();
    }
  }
  EXPECT_EQ(counted, 12) << "preemptions, whole or folded, in " << looped.DebugString();
  // Three in the last hour: not a fourth.
  Pass(absl::Minutes(5));
  const std::string waits = Submit(Spec("high", 1, "high"));
  EXPECT_EQ(Job(low).state(), v1::RUNNING);
  EXPECT_EQ(Job(waits).state(), v1::PENDING);
}

}  // namespace
}  // namespace ringmaster
