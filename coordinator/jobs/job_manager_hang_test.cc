// JobManager and hung ranks, on a fake clock: a trainer rank that makes no
// progress, a silent command, and the stacks taken of every rank before
// the attempt is stopped, or on demand.
#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

TEST_F(JobManagerTest, HungTrainerRankIsNamedWithItsWorkerAndStep) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  v1::JobSpec spec;
  spec.set_name("train");
  spec.set_ranks(2);
  spec.set_max_restarts(0);
  spec.set_hang_timeout_s(10);
  spec.mutable_trainer()->mutable_data()->set_path("digits");
  const std::string id = Submit(spec);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  auto beat = [&](TestWorker& w, int rank, int64_t step, int64_t reports) {
    v1::Heartbeat b;
    v1::RankProgress* p = b.add_progress();
    *p->mutable_rank() = Ref(id, 0, rank);
    p->mutable_progress()->set_step(step);
    v1::RunningRank* r = b.add_running();
    *r->mutable_rank() = Ref(id, 0, rank);
    r->set_progress_reports(reports);
    ASSERT_TRUE(manager_->OnHeartbeat(w.session, b));
  };
  for (int t = 0; t < 5; ++t) {
    beat(w1, 0, t * 10, t);
    beat(w2, 1, t * 10, t);
    clock_.Advance(absl::Seconds(1));
  }
  // Rank 1 is stopped at step 40; rank 0 blocks in the all-reduce and keeps
  // reporting step 40.
  for (int t = 5; t < 13; ++t) {
    beat(w1, 0, 40, t);
    beat(w2, 1, 40, 4);
    clock_.Advance(absl::Seconds(1));
    manager_->Tick();
  }
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  w1.link.Take();
  w2.link.Take();
  beat(w1, 0, 40, 14);
  beat(w2, 1, 40, 4);
  clock_.Advance(absl::Seconds(1));
  manager_->Tick();
  // Declared hung: every rank's stacks are asked for before anything is
  // stopped.
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  for (TestWorker* w : {&w1, &w2}) {
    std::vector<v1::CoordinatorMessage> sent = w->link.Take();
    ASSERT_EQ(sent.size(), 1u) << w->id;
    ASSERT_TRUE(sent[0].has_dump_stacks()) << sent[0].ShortDebugString();
    EXPECT_EQ(sent[0].dump_stacks().why(),
              "declared hung: rank 1 on worker w2 made no progress for 10s (last step 40)");
  }
  auto answer = [&](TestWorker& w, int rank, const std::string& phase, const std::string& state) {
    v1::WorkerMessage m;
    m.set_seq(++w.seq);
    v1::StacksDumped& dumped = *m.mutable_stacks_dumped();
    dumped.set_job_id(id);
    v1::RankStacks& r = *dumped.add_ranks();
    r.set_rank(rank);
    r.set_step(41);
    r.set_phase(phase);
    r.set_bucket(phase == "all-reduce" ? 2 : -1);
    r.set_process(state);
    Deliver(w, m);
  };
  answer(w1, 0, "all-reduce", "sleeping");
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "w2 has not answered";
  answer(w2, 1, "forward", "stopped");
  const v1::Job failed = Job(id);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::RANK_HUNG);
  EXPECT_EQ(Last(id).message(),
            "rank 1 on worker w2 made no progress for 10s (last step 40); rank 0 waits in "
            "all-reduce of bucket 2 at step 41 for rank 1; rank 1 is in forward (stopped)");
  EXPECT_EQ(failed.stacks().ranks_size(), 2);
  EXPECT_EQ(failed.stacks().ranks(1).worker_id(), "w2");
}

TEST_F(JobManagerTest, StacksAskedForAreAnsweredByTheDeadlineOrWhenTheAttemptEnds) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
  const std::string slow = Submit(1);
  Started(w1, slow, 0, 0);
  std::optional<absl::StatusOr<v1::StacksReport>> by_deadline;
  manager_->DumpStacks(slow, [&](const absl::StatusOr<v1::StacksReport>& r) { by_deadline = r; });
  Pass(JobManager::kStacksWait - absl::Seconds(1));
  EXPECT_FALSE(by_deadline.has_value()) << "w1 may still answer";
  Pass(absl::Seconds(1));
  ASSERT_TRUE(by_deadline.has_value());
  ASSERT_OK(*by_deadline);
  EXPECT_EQ((*by_deadline)->ranks(0).summary(), "no stacks: worker w1 did not answer");
  EXPECT_EQ(Job(slow).state(), v1::RUNNING) << "asking for stacks stops nothing";
  EXPECT_EQ(Job(slow).stacks().ranks_size(), 1);

  std::optional<absl::StatusOr<v1::StacksReport>> at_cancel;
  manager_->DumpStacks(slow, [&](const absl::StatusOr<v1::StacksReport>& r) { at_cancel = r; });
  ASSERT_OK(manager_->Cancel(slow));
  manager_->Tick();
  ASSERT_TRUE(at_cancel.has_value()) << "the attempt is over: nothing more will come";
  EXPECT_OK(*at_cancel);

  std::optional<absl::StatusOr<v1::StacksReport>> ended;
  manager_->DumpStacks(slow, [&](const absl::StatusOr<v1::StacksReport>& r) { ended = r; });
  ASSERT_TRUE(ended.has_value());
  EXPECT_THAT(ended->status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  manager_->DumpStacks("nope-9", [&](const absl::StatusOr<v1::StacksReport>& r) { ended = r; });
  EXPECT_THAT(ended->status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerTest, CommandJobHangsOnlyWhenSilentAndOnlyWhenAsked) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
  v1::JobSpec spec;
  spec.set_name("quiet");
  spec.set_ranks(1);
  spec.set_max_restarts(0);
  spec.add_command("sleep");
  const std::string off = Submit(spec);
  spec.set_hang_timeout_s(5);
  const std::string on = Submit(spec);
  Started(w1, off, 0, 0);
  Started(w1, on, 0, 0);
  Silence(w1);  // heartbeats by hand, with the ranks' output
  auto beat = [&](int64_t output_bytes) {
    v1::RunningRank r = Running(on, 0, 0, 1);
    r.set_output_bytes(output_bytes);
    ASSERT_TRUE(Heartbeat(w1, {Running(off, 0, 0, 0), r}));
  };
  for (int t = 1; t <= 4; ++t) {
    clock_.Advance(absl::Seconds(1));
    beat(t * 100);  // it writes
    manager_->Tick();
  }
  for (int t = 1; t <= 4; ++t) {
    clock_.Advance(absl::Seconds(1));
    beat(400);  // and falls silent
    manager_->Tick();
  }
  EXPECT_EQ(Job(on).state(), v1::RUNNING) << "output is progress";
  clock_.Advance(absl::Seconds(1));
  beat(400);
  manager_->Tick();
  // Its worker does not answer for the stacks: the failure waits for them
  // kStacksWait at most.
  for (absl::Duration waited; waited < JobManager::kStacksWait; waited += absl::Seconds(1)) {
    EXPECT_EQ(Job(on).state(), v1::RUNNING);
    clock_.Advance(absl::Seconds(1));
    beat(400);
    manager_->Tick();
  }
  EXPECT_EQ(Job(on).state(), v1::FAILED);
  EXPECT_EQ(Last(on).message(),
            "rank 0 on worker w1 made no progress for 5s (no step reported); rank 0: no stacks: "
            "worker w1 did not answer");
  for (int t = 0; t < 100; ++t) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(Heartbeat(w1, {Running(off, 0, 0, 0)}));
    manager_->Tick();
  }
  EXPECT_EQ(Job(off).state(), v1::RUNNING) << "no hang_timeout_s: off for command jobs";
}

}  // namespace
}  // namespace ringmaster
