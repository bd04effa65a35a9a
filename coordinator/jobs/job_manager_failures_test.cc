// JobManager: failures and recovery: root causes, fail-fast, start
// timeouts, lost and returning workers, duplicate ids, event
// replay, reconciliation and elastic resizing.
#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

TEST_F(JobManagerTest, PlainExitWaitsBrieflyForABetterCauseThenFailsTheJob) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  w1.link.Take();
  Exited(w2, id, 0, 1, 3);
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "rank 0 may yet show the root cause";
  Pass(absl::Milliseconds(999));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Pass(absl::Milliseconds(1));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::RANK_EXITED);
  EXPECT_EQ(Last(id).message(), "rank 1 exited with code 3");
  EXPECT_EQ(Stops(w1), 1) << "rank 0 must be told to stop";
  Exited(w1, id, 0, 0, 0, /*stopped=*/true);
  EXPECT_EQ(Job(id).ranks(0).state(), v1::RANK_STOPPED);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
}

TEST_F(JobManagerTest, KilledRankIsTheCauseEvenWhenItsPeersExitReachesFirst) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string id = Submit(2, /*max_restarts=*/3);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Exited(w1, id, 0, 0, 1);  // rank 0 saw its peer vanish
  Killed(w2, id, 0, 1, 9);  // kill -9 of rank 1
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  EXPECT_EQ(Last(id).reason(), v1::RANK_SIGNALED);
  EXPECT_EQ(Last(id).message(), "rank 1 was killed by signal 9");
}

TEST_F(JobManagerTest, PeerOfALostWorkerFailsWithTheLostWorkerAsCause) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string id = Submit(2, /*max_restarts=*/3);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Disconnect(w2);           // kill -9 of the worker: its stream breaks at once
  Exited(w1, id, 0, 0, 1);  // and rank 0 loses its peer
  EXPECT_EQ(Job(id).state(), v1::RESTARTING) << "no need to wait for the grace";
  EXPECT_EQ(Last(id).reason(), v1::WORKER_LOST);
  EXPECT_EQ(Last(id).message(),
            "rank 1 lost with worker w2 (its stream broke); then rank 0 exited with code 1");
  // The restart does not wait for w2's rank: w2 takes no ranks until it is
  // back, and then the stale rank is stopped.
  Pass(absl::Seconds(2));
  EXPECT_EQ(Job(id).state(), v1::PENDING);
}

TEST_F(JobManagerTest, SameFailureTwiceWithoutProgressFailsFast) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1, /*max_restarts=*/5);
  Started(w1, id, 0, 0);
  Exited(w1, id, 0, 0, 3);
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  Pass(absl::Seconds(2));
  Started(w1, id, 1, 0);
  Exited(w1, id, 1, 0, 3);
  EXPECT_EQ(Job(id).state(), v1::FAILED) << "4 restarts left, but it would fail again";
  EXPECT_EQ(Last(id).message(),
            "rank 0 exited with code 3, the same failure as the attempt before, with no "
            "progress in between: not restarting");
}

TEST_F(JobManagerTest, FailureAfterProgressIsRestarted) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  v1::JobSpec spec;
  spec.set_name("train");
  spec.set_ranks(1);
  spec.set_max_restarts(5);
  spec.mutable_trainer()->mutable_data()->set_path("digits");
  const std::string id = Submit(spec);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Started(w1, id, attempt, 0);
    for (int step : {10, 20}) {
      v1::Heartbeat beat;
      v1::RankProgress* p = beat.add_progress();
      *p->mutable_rank() = Ref(id, attempt, 0);
      p->mutable_progress()->set_step(step);
      ASSERT_TRUE(manager_->OnHeartbeat(w1.session, beat));
    }
    Exited(w1, id, attempt, 0, 3);
    EXPECT_EQ(Job(id).state(), v1::RESTARTING) << "attempt " << attempt;
    Pass(absl::Seconds(10));
  }
}

// A crash loop backs off 2, 4, 8 s (the fixture's base is 2 s); an
// attempt that steps for 10 bases ends it, and its restart waits 2 s again.
TEST_F(JobManagerTest, BackOffDoublesInACrashLoopAndStartsOverAfterAnAttemptThatRanWell) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  v1::JobSpec spec;
  spec.set_name("train");
  spec.set_ranks(1);
  spec.set_max_restarts(10);
  spec.mutable_trainer()->mutable_data()->set_path("digits");
  const std::string id = Submit(spec);
  auto restarted_after = [&](absl::Duration wait) {
    EXPECT_EQ(Job(id).state(), v1::RESTARTING);
    Pass(wait - absl::Milliseconds(10));
    EXPECT_EQ(Job(id).state(), v1::RESTARTING) << "before " << wait;
    Pass(absl::Milliseconds(20));
    EXPECT_NE(Job(id).state(), v1::RESTARTING) << "after " << wait;
  };
  int attempt = 0;
  for (absl::Duration wait : {absl::Seconds(2), absl::Seconds(4), absl::Seconds(8)}) {
    Started(w1, id, attempt, 0);
    Exited(w1, id, attempt, 0, 10 + attempt);  // no step; another code each time
    restarted_after(wait);
    ++attempt;
  }
  Started(w1, id, attempt, 0);
  for (int step : {100, 200}) {  // progress: a step past the first
    v1::Heartbeat beat;
    v1::RankProgress* p = beat.add_progress();
    *p->mutable_rank() = Ref(id, attempt, 0);
    p->mutable_progress()->set_step(step);
    ASSERT_TRUE(manager_->OnHeartbeat(w1.session, beat));
  }
  Pass(absl::Seconds(20));
  Exited(w1, id, attempt, 0, 20);
  restarted_after(absl::Seconds(2));
  ++attempt;
  Started(w1, id, attempt, 0);
  Exited(w1, id, attempt, 0, 21);
  restarted_after(absl::Seconds(4));
}

TEST_F(JobManagerTest, StartTimeoutNamesTheRanksThatNeverStarted) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 3));
  v1::JobSpec spec;
  spec.set_name("slow");
  spec.set_ranks(3);
  spec.set_max_restarts(0);
  spec.set_start_timeout_s(20);
  spec.add_command("true");
  const std::string id = Submit(spec);
  Started(w1, id, 0, 1);
  Pass(absl::Seconds(19));
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::RANK_START_TIMEOUT);
  EXPECT_EQ(Last(id).message(), "ranks 0, 2 did not report started within 20s");
}

TEST_F(JobManagerTest, LostWorkerFailsItsJob) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Silence(w2);
  Pass(absl::Seconds(5));
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::WORKER_LOST);
  EXPECT_EQ(Last(id).message(), "rank 1 lost with worker w2: no heartbeat for 5s");
  auto workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].state(), v1::WORKER_STATE_ALIVE);
  EXPECT_EQ(workers[1].state(), v1::WORKER_STATE_LOST);
  EXPECT_EQ(workers[1].state_reason(), "no heartbeat for 5s");
}

TEST_F(JobManagerTest, PausedWorkerIsTakenBackAndItsStaleRankStopped) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1, /*max_restarts=*/2);
  Started(w1, id, 0, 0);
  Silence(w1);
  Pass(absl::Seconds(13));  // kill -STOP; sleep 13
  EXPECT_EQ(Job(id).history(3).reason(), v1::WORKER_LOST);
  EXPECT_EQ(Job(id).history(3).state(), v1::RESTARTING);
  EXPECT_EQ(Job(id).state(), v1::PENDING) << "no schedulable worker";
  w1.link.Take();
  // kill -CONT: the worker heartbeats again with its old rank still running.
  ASSERT_TRUE(Heartbeat(w1, {Running(id, 0, 0)}));
  EXPECT_EQ(manager_->ListWorkers()[0].state(), v1::WORKER_STATE_ALIVE);
  EXPECT_EQ(Stops(w1), 1) << "the rank of the ended attempt is stopped";
  EXPECT_EQ(Job(id).state(), v1::PENDING) << "its slot is busy until the old rank exits";
  Exited(w1, id, 0, 0, 0, /*stopped=*/true);
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  EXPECT_EQ(Job(id).attempt(), 1);
}

TEST_F(JobManagerTest, DuplicateWorkerIdIsRefusedAndGetsNothing) {
  TestWorker real, impostor;
  ASSERT_OK(Register(real, "w1", 1));
  absl::Status refused = Register(impostor, "w1", 1, {}, {}, "another-process");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_NE(refused.message().find("held by the worker at w1.local:7080"), std::string::npos)
      << refused;
  const std::string id = Submit(1);
  EXPECT_EQ(Starts(real).size(), 1u);
  EXPECT_TRUE(impostor.link.Take().empty());
  Started(real, id, 0, 0);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(JobManagerTest, EndedSessionIsIgnored) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1);
  const WorkerSession old = w1.session;
  Disconnect(w1);
  ASSERT_OK(Register(w1, "w1", 1, {Running(id, 0, 0)}));
  v1::WorkerMessage started = StartedEvent(w1, id, 0, 0);
  EXPECT_EQ(manager_->OnRankEvent(old, started), 0) << "not acknowledged";
  EXPECT_FALSE(manager_->OnHeartbeat(old, v1::Heartbeat()));
  EXPECT_EQ(Job(id).ranks(0).state(), v1::RANK_ASSIGNED);
  EXPECT_EQ(manager_->OnRankEvent(w1.session, started), started.seq());
  EXPECT_EQ(Job(id).ranks(0).state(), v1::RANK_RUNNING);
}

TEST_F(JobManagerTest, ExitHeldAcrossACoordinatorRestartIsAppliedOnce) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  Started(w1, id, 0, 1);
  Exited(w1, id, 0, 0, 0);
  // The exit of rank 1 is written as the coordinator dies: never applied,
  // never acknowledged, so the worker still holds it.
  v1::WorkerMessage exit = ExitedEvent(w1, id, 0, 1, 0);
  Restart();
  TestWorker again;
  ASSERT_OK(Register(again, "w1", 2, {}, {exit}, w1.incarnation));
  EXPECT_EQ(again.acked, exit.seq());
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::SUCCEEDED) << "not FAILED as a lost rank";
  EXPECT_EQ(Last(id).reason(), v1::RANKS_SUCCEEDED);
  const int history = job.history_size();
  // Sent again (say the acknowledgement was lost): applied once.
  EXPECT_EQ(manager_->OnRankEvent(again.session, exit), exit.seq());
  EXPECT_EQ(Job(id).history_size(), history);
}

TEST_F(JobManagerTest, ReconcileNeverPlacesNewJobsOnTheWorkerItReconciles) {
  std::string lost, queued;
  {
    TestWorker w1;
    ASSERT_OK(Register(w1, "w1", 1));
    lost = Submit(1);
    Started(w1, lost, 0, 0);
    queued = Submit(1);
    EXPECT_EQ(Job(queued).state(), v1::PENDING);
  }
  Restart();
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1, {}, {}, "restarted-process"));
  manager_->Tick();
  EXPECT_EQ(Job(lost).state(), v1::FAILED);
  EXPECT_EQ(Last(lost).message(), "rank 0 was gone when worker w1 registered again");
  EXPECT_EQ(Job(queued).state(), v1::STARTING)
      << "placed once the worker was reconciled, not marked lost: " << Last(queued).message();
  EXPECT_EQ(Starts(w1).size(), 1u);
}

TEST_F(JobManagerTest, StartLostWithTheCoordinatorIsSentAgain) {
  std::string id;
  {
    TestWorker w1;
    ASSERT_OK(Register(w1, "w1", 1));
    id = Submit(1);  // STARTING stored; the coordinator dies before the start goes out
  }
  Restart();
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1, {}, {}, "w1-process-1"));
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  auto starts = Starts(w1);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].rank().job_id(), id);
  Started(w1, id, 0, 0);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(JobManagerTest, ElasticJobStartsSmallerAndRegrowsWhenRoomLasts) {
  TestWorker w1, w2, w3;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  v1::JobSpec spec;
  spec.set_name("elastic");
  spec.set_ranks(3);
  spec.set_min_ranks(2);
  spec.set_scale_up_after_s(30);
  spec.add_command("true");
  const std::string id = Submit(spec);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::STARTING);
  EXPECT_EQ(job.world_size(), 2);
  EXPECT_EQ(Last(id).reason(), v1::SCALED_DOWN);
  EXPECT_EQ(Last(id).message(),
            "elastic: 2 of 3 ranks fit (min_ranks 2); 2 ranks on 2 workers; rank 0 on w1");
  EXPECT_EQ(Starts(w1)[0].env().at("WORLD_SIZE"), "2");
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  ASSERT_OK(Register(w3, "w3", 1));
  manager_->Tick();
  Pass(absl::Seconds(29));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  EXPECT_EQ(Last(id).reason(), v1::SCALING_UP);
  EXPECT_EQ(Job(id).restarts(), 0) << "a resize is not a failure";
  EXPECT_EQ(Stops(w1), 1);
  Exited(w1, id, 0, 0, 0, /*stopped=*/true);
  Exited(w2, id, 0, 1, 0, /*stopped=*/true);
  manager_->Tick();
  job = Job(id);
  EXPECT_EQ(job.state(), v1::STARTING);
  EXPECT_EQ(job.world_size(), 3);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(Last(id).reason(), v1::SCHEDULED);
  auto starts = Starts(w3);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].env().at("WORLD_SIZE"), "3");
  EXPECT_EQ(starts[0].env().at("TORCHELASTIC_RESTART_COUNT"), "1");
}

TEST_F(JobManagerTest, ElasticJobShrinksWhenAWorkerIsLost) {
  TestWorker w1, w2, w3;
  for (auto* w : {&w1, &w2, &w3}) {
    ASSERT_OK(Register(*w, "w" + std::to_string(w == &w1 ? 1 : w == &w2 ? 2 : 3), 1));
  }
  v1::JobSpec spec;
  spec.set_name("elastic");
  spec.set_ranks(3);
  spec.set_min_ranks(2);
  spec.set_max_restarts(1);
  spec.add_command("true");
  const std::string id = Submit(spec);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Started(w3, id, 0, 2);
  Disconnect(w3);
  Exited(w1, id, 0, 0, 1, /*stopped=*/false);
  Exited(w2, id, 0, 1, 1, /*stopped=*/false);
  EXPECT_EQ(Last(id).reason(), v1::WORKER_LOST);
  Pass(absl::Seconds(2));
  EXPECT_EQ(Job(id).state(), v1::STARTING) << "ranks: 3, min_ranks: 2 does not wait";
  EXPECT_EQ(Job(id).world_size(), 2);
}

// One throughput figure: the ranks' mean rate times the world size, the
// same before every rank has reported as after.
TEST_F(JobManagerTest, ThroughputIsTheWholeJobsFromTheFirstReport) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  Started(w1, id, 0, 1);
  const auto report = [&](int rank, double rate) {
    v1::Heartbeat beat;
    v1::RankProgress* p = beat.add_progress();
    *p->mutable_rank() = Ref(id, 0, rank);
    p->mutable_progress()->set_step(10);
    p->mutable_progress()->set_samples_per_second(rate);
    ASSERT_TRUE(manager_->OnHeartbeat(w1.session, beat));
  };
  report(0, 1000);
  EXPECT_EQ(Job(id).progress().samples_per_second(), 2000) << "rank 1 has not reported yet";
  report(1, 1200);
  EXPECT_EQ(Job(id).progress().samples_per_second(), 2200);
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// A rank's report carries each step's duration since the last one (for the
// worker's histogram); the job keeps the report without them, so that a
// fast trainer does not grow every stored job by hundreds of numbers.
TEST_F(JobManagerTest, JobsKeepProgressWithoutStepDurations) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1);
  Started(w1, id, 0, 0);
  v1::Heartbeat beat;
  v1::RankProgress* p = beat.add_progress();
  *p->mutable_rank() = Ref(id, 0, 0);
  p->mutable_progress()->set_step(600);
  for (int i = 0; i < 600; ++i) p->mutable_progress()->add_step_seconds(0.0016);
  ASSERT_TRUE(manager_->OnHeartbeat(w1.session, beat));
  EXPECT_EQ(Job(id).progress().step(), 600);
  EXPECT_EQ(Job(id).progress().step_seconds_size(), 0);
}

// The worker ran the rank to its end, but the exit never reached the
// coordinator: its heartbeats no longer list the rank.
std::vector<v1::RankRef> Queries(TestWorker& w) {
  std::vector<v1::RankRef> out;
  for (auto& m : w.link.Take()) {
    if (m.has_query_rank()) out.push_back(m.query_rank().rank());
  }
  return out;
}

TEST_F(JobManagerTest, AnExitLostOnTheWayIsAskedForAgainAndApplied) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1);
  Started(w1, id, 0, 0);
  const v1::WorkerMessage lost = ExitedEvent(w1, id, 0, 0, 0);  // never delivered
  w1.running.clear();
  Pass(absl::Seconds(1));
  EXPECT_TRUE(Queries(w1).empty()) << "one heartbeat without a rank can be a race";
  Pass(absl::Seconds(1));
  std::vector<v1::RankRef> asked = Queries(w1);
  ASSERT_EQ(asked.size(), 1u) << "asked after two heartbeats without it";
  EXPECT_EQ(asked[0].job_id(), id);
  EXPECT_EQ(asked[0].rank(), 0);
  Pass(absl::Seconds(1));
  EXPECT_TRUE(Queries(w1).empty()) << "asked once";
  // The worker still has the exit and sends it again, under a new number.
  v1::WorkerMessage again = lost;
  again.set_seq(++w1.seq);
  Deliver(w1, again);
  EXPECT_EQ(Job(id).state(), v1::SUCCEEDED);
  EXPECT_EQ(ListWorkersUsed("w1"), 0);
}

TEST_F(JobManagerTest, ARankNoLongerRunAndNotAnsweredForIsLostAndItsSlotFreed) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1);
  Started(w1, id, 0, 0);
  w1.running.clear();
  Pass(absl::Seconds(3));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::RANK_LOST);
  EXPECT_EQ(Last(id).message(),
            "rank 0 no longer runs on worker w1 and its exit never arrived (4 heartbeats "
            "without it)");
  EXPECT_EQ(ListWorkersUsed("w1"), 0);
  EXPECT_OK(manager_->Delete(id));
}

TEST_F(JobManagerTest, ACancelledJobWhoseExitWasLostStillFreesItsSlot) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1);
  Started(w1, id, 0, 0);
  w1.running.clear();  // it exited; the exit was lost
  ASSERT_OK(manager_->Cancel(id));
  EXPECT_EQ(ListWorkersUsed("w1"), 1) << "the stop finds nothing to stop: no exit comes";
  EXPECT_THAT(manager_->Delete(id), IsError());
  Pass(absl::Seconds(4));
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
  EXPECT_EQ(Job(id).ranks(0).state(), v1::RANK_FAILED);
  EXPECT_EQ(ListWorkersUsed("w1"), 0);
  EXPECT_OK(manager_->Delete(id));
  // And the next job takes the slot.
  const std::string next = Submit(1);
  EXPECT_EQ(Job(next).state(), v1::STARTING);
}

TEST_F(JobManagerTest, ARankListedAgainIsNotAskedFor) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1);
  Started(w1, id, 0, 0);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(Heartbeat(w1));  // a heartbeat sampled before the start, written after it
    manager_->Tick();
    Pass(absl::Seconds(1));
  }
  EXPECT_TRUE(Queries(w1).empty());
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

}  // namespace
}  // namespace ringmaster
