// JobManager: a pending job held and released, given another priority, and
// an ended job requeued as a new attempt of the same id, each said in the
// job's history and kept across a coordinator restart.
#include <gtest/gtest.h>

#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

class JobManagerPendingTest : public JobManagerTest {
 protected:
  std::string SubmitAs(const std::string& owner, const std::string& name,
                       const std::string& priority = "") {
    v1::JobSpec spec;
    spec.set_name(name);
    spec.set_ranks(1);
    spec.add_command("true");
    spec.set_priority(priority);
    spec.set_max_restarts(0);
    absl::StatusOr<std::string> id = manager_->Submit(spec, "", owner);
    EXPECT_OK(id);
    manager_->Tick();
    return id.value_or("");
  }
};

TEST_F(JobManagerPendingTest, AHeldJobIsNotScheduledUntilReleased) {
  const std::string id = SubmitAs("alice", "held");
  ASSERT_EQ(Job(id).state(), v1::PENDING);
  ASSERT_OK_AND_ASSIGN(v1::Job held, manager_->Hold(id, "alice"));
  EXPECT_EQ(held.held_by(), "alice");
  EXPECT_EQ(held.pending_reason(), "held by alice; `ringmaster release " + id + "` lets it run");
  EXPECT_EQ(Last(id).reason(), v1::HELD);
  const int history = Job(id).history_size();
  ASSERT_OK(manager_->Hold(id, "alice").status());
  EXPECT_EQ(Job(id).history_size(), history) << "held twice, said once";

  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  Pass(absl::Seconds(3));
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_TRUE(Starts(w1).empty());
  Restart();  // held across a coordinator restart
  ASSERT_OK(Register(w1, "w1", 1));
  Pass(absl::Seconds(3));
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Job(id).held_by(), "alice");

  ASSERT_OK_AND_ASSIGN(v1::Job released, manager_->Release(id, "admin"));
  EXPECT_TRUE(released.held_by().empty());
  EXPECT_EQ(Last(id).message(), "released by admin (held by alice)");
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  EXPECT_THAT(manager_->Hold(id, "alice").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is STARTING; only a PENDING job can be held")));
  EXPECT_THAT(manager_->Hold("nope-1", "alice").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerPendingTest, ALowerPriorityGivenToAPendingJobLetsTheNextRunFirst) {
  const std::string first = SubmitAs("alice", "first");
  const std::string second = SubmitAs("alice", "second");
  ASSERT_OK_AND_ASSIGN(v1::Job lowered, manager_->SetPriority(first, "low", "alice"));
  EXPECT_EQ(lowered.priority(), 0);
  EXPECT_EQ(lowered.spec().priority(), "low");
  EXPECT_EQ(Last(first).reason(), v1::PRIORITY_CHANGED);
  EXPECT_EQ(Last(first).message(), "priority normal (100) -> low (0) by alice");
  // Refused as at submit, and nothing changed: a class unknown, one not
  // open to users of the queue, a number from a user.
  EXPECT_THAT(manager_->SetPriority(second, "urgent", "alice").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(manager_->SetPriority(second, "high", "alice").status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(manager_->SetPriority(second, "5000", "alice").status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(Job(second).priority(), 100);
  EXPECT_EQ(Job(second).spec().priority(), "normal");
  EXPECT_EQ(Last(second).reason(), v1::SUBMITTED);
  // The admin may.
  ASSERT_OK_AND_ASSIGN(v1::Job raised, manager_->SetPriority(second, "high", "admin"));
  EXPECT_EQ(raised.priority(), 1000);

  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(second).state(), v1::STARTING);
  EXPECT_EQ(Job(first).state(), v1::PENDING);
}

TEST_F(JobManagerPendingTest, AnEndedJobIsRequeuedAsANewAttemptOfTheSameId) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = SubmitAs("alice", "again");
  Started(w1, id, 0, 0);
  EXPECT_THAT(manager_->Requeue(id, "alice").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is RUNNING; only an ended job is requeued")));
  Exited(w1, id, 0, 0, 3);
  ASSERT_EQ(Job(id).state(), v1::FAILED);
  Pass(absl::Seconds(1));  // retired from memory
  Restart();

  ASSERT_OK_AND_ASSIGN(v1::Job requeued, manager_->Requeue(id, "alice"));
  EXPECT_EQ(requeued.state(), v1::PENDING);
  EXPECT_EQ(requeued.attempt(), 1);
  EXPECT_EQ(requeued.restarts(), 0);
  EXPECT_EQ(requeued.ranks_size(), 0);
  EXPECT_EQ(Last(id).reason(), v1::REQUEUED);
  EXPECT_EQ(Last(id).message(),
            "requeued by alice after it ended FAILED: attempt 1, resuming from its checkpoints");
  ASSERT_OK(Register(w1, "w1", 1));
  Pass(absl::Seconds(1));
  ASSERT_EQ(Job(id).state(), v1::STARTING);
  Started(w1, id, 1, 0);
  Exited(w1, id, 1, 0, 0);
  const v1::Job done = Job(id);
  EXPECT_EQ(done.state(), v1::SUCCEEDED);
  EXPECT_EQ(done.id(), id);
  // Attempt 0's placement is kept, for its logs.
  ASSERT_EQ(done.past_attempts_size(), 1);
  EXPECT_EQ(done.past_attempts(0).attempt(), 0);
}

}  // namespace
}  // namespace ringmaster
