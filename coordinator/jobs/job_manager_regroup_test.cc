// JobManager: a failed rank of a built-in trainer job replaced alone while
// the others keep their processes, and every rank restarted when that
// does not work out.
#include "absl/strings/match.h"
#include "coordinator/jobs/job_manager_fixture.h"
#include "domain/group_generation.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

class JobManagerRegroupTest : public JobManagerTest {
 protected:
  JobManagerRegroupTest() {
    options_.rank_env.regroup_timeout = absl::Seconds(60);
    Restart();
  }

  // A 2-rank trainer job running on w1 (rank 0) and w2 (rank 1), rank 0
  // at step 20.
  std::string RunningJob(TestWorker& w1, TestWorker& w2, int max_restarts = 3) {
    EXPECT_OK(Register(w1, "w1", 1));
    EXPECT_OK(Register(w2, "w2", 1));
    const std::string id = Submit(TrainerSpec(2, max_restarts));
    (void)Starts(w1);
    (void)Starts(w2);
    Started(w1, id, 0, 0);
    Started(w2, id, 0, 1);
    Report(w1, id, 0, 20, 0);
    EXPECT_EQ(Job(id).state(), v1::RUNNING);
    return id;
  }

  // Rank `rank`'s progress at `step` in group `generation`.
  void Report(TestWorker& w, const std::string& id, int rank, int64_t step, int generation,
              const std::string& resumed_from = "", int64_t resumed_step = 0,
              absl::Time first_step = absl::UnixEpoch()) {
    v1::Heartbeat beat;
    for (const auto& [key, running] : w.running) *beat.add_running() = running;
    v1::RankProgress& p = *beat.add_progress();
    *p.mutable_rank() = Ref(id, 0, rank);
    p.mutable_progress()->set_step(step);
    p.mutable_progress()->set_group_generation(generation);
    p.mutable_progress()->set_resumed_from(resumed_from);
    p.mutable_progress()->set_resumed_step(resumed_step);
    if (first_step != absl::UnixEpoch()) {
      p.mutable_progress()->set_first_step_unix_ms(absl::ToUnixMillis(first_step));
    }
    manager_->OnHeartbeat(w.session, beat);
  }

  bool Announced(const std::string& id, int generation) {
    return rendezvous_.Get({id, 0}, GroupKey(generation)).ok();
  }
};

TEST_F(JobManagerRegroupTest, AFailedRankIsStartedAgainAloneAndTheOthersKeepTheirs) {
  TestWorker w1, w2;
  const std::string id = RunningJob(w1, w2);
  Killed(w2, id, 0, 1, 9);

  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_EQ(job.group_generation(), 1);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.ranks(1).state(), v1::RANK_ASSIGNED);
  EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  EXPECT_EQ(job.ranks(0).state(), v1::RANK_RUNNING);
  EXPECT_EQ(job.root_cause().rank(), 1);
  EXPECT_TRUE(Announced(id, 1));
  EXPECT_EQ(Last(id).reason(), v1::RANK_REPLACED);
  EXPECT_EQ(Last(id).message(),
            "rank 1 was killed by signal 9: rank 1 started again alone on its worker "
            "w2; 1 rank keeps its process (group 1 of attempt 0; 1 of 3 restarts used)");
  EXPECT_EQ(Stops(w1), 0) << "rank 0 keeps its process";
  const std::vector<v1::StartRank> starts = Starts(w2);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].rank().rank(), 1);
  EXPECT_EQ(starts[0].rank().attempt(), 0);
  EXPECT_EQ(starts[0].generation(), 1);
  EXPECT_EQ(starts[0].env().at("RINGMASTER_GROUP_GENERATION"), "1");
  EXPECT_EQ(starts[0].env().at("RINGMASTER_REGROUP_TIMEOUT_S"), "60");

  // The killed process's exit again (as after a coordinator restart): not
  // the replacement's.
  Deliver(w2, ExitedEvent(w2, id, 0, 1, 0, 9));
  EXPECT_EQ(Job(id).ranks(1).state(), v1::RANK_ASSIGNED);
  v1::WorkerMessage started = StartedEvent(w2, id, 0, 1);
  started.mutable_rank_started()->set_generation(1);
  Deliver(w2, started);
  const absl::Time failed = clock_.Now();
  clock_.Advance(absl::Milliseconds(800));
  Report(w1, id, 0, 20, 0);  // rank 0's last report of the group before: not a resume
  EXPECT_NE(Job(id).regroup_since_unix_ms(), 0);
  // Its first step in the new group came 300 ms after the failure; the
  // report, later.
  Report(w1, id, 0, 21, 1, "memory", 20, failed + absl::Milliseconds(300));
  job = Job(id);
  EXPECT_EQ(job.regroup_since_unix_ms(), 0);
  EXPECT_EQ(job.ranks(1).state(), v1::RANK_RUNNING);
  EXPECT_EQ(job.resumed().generation(), 1);
  EXPECT_EQ(job.resumed().steps_redone(), 0);
  EXPECT_DOUBLE_EQ(job.resumed().seconds(), 0.3);
  EXPECT_EQ(Last(id).reason(), v1::RESUMED);
  EXPECT_EQ(Last(id).message(),
            "resumed at step 20 from memory, the ranks that did not fail keeping their processes, "
            "0 steps redone; first step 0.3 s after the rank failed");
  EXPECT_DOUBLE_EQ(job.goodput().lost_seconds().at("restart"), 0.3);
}

// A replacement that never joins: past --regroup-timeout every rank is
// restarted, and the history says why.
TEST_F(JobManagerRegroupTest, AGroupThatDoesNotFormInTimeRestartsEveryRank) {
  TestWorker w1, w2;
  const std::string id = RunningJob(w1, w2);
  Exited(w2, id, 0, 1, 1);
  (void)Starts(w2);
  v1::WorkerMessage started = StartedEvent(w2, id, 0, 1);
  started.mutable_rank_started()->set_generation(1);
  Deliver(w2, started);
  EXPECT_EQ(Job(id).ranks(1).state(), v1::RANK_RUNNING);
  Pass(absl::Seconds(59));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Pass(absl::Seconds(3));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  EXPECT_TRUE(absl::StrContains(Job(id).root_cause().message(),
                                "group 1 did not form within 1m of a rank's replacement "
                                "(--regroup-timeout): restarting every rank"))
      << Job(id).root_cause().message();
  EXPECT_GE(Stops(w1), 1) << "rank 0 is stopped";
  EXPECT_EQ(Job(id).regroup_since_unix_ms(), 0);
  EXPECT_EQ(Job(id).restarts(), 1) << "one failure, one restart";
}

// A second failure while the group forms again is not patched over: every
// rank restarts, and the next attempt starts at group 0.
TEST_F(JobManagerRegroupTest, AFailureWhileRegroupingRestartsEveryRank) {
  TestWorker w1, w2;
  const std::string id = RunningJob(w1, w2);
  Exited(w2, id, 0, 1, 1);
  (void)Starts(w2);
  Exited(w1, id, 0, 0, 1);
  Pass(absl::Seconds(2));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  // The replacement, stopped (its events carry its group).
  v1::WorkerMessage stopped = ExitedEvent(w2, id, 0, 1, 1, 0, /*stopped=*/true);
  stopped.mutable_rank_exited()->set_generation(1);
  Deliver(w2, stopped);
  Pass(absl::Seconds(5));
  const v1::Job job = Job(id);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.group_generation(), 0);
  for (TestWorker* w : {&w1, &w2}) {
    for (const v1::StartRank& start : Starts(*w)) {
      EXPECT_EQ(start.generation(), 0);
      EXPECT_EQ(start.env().at("RINGMASTER_GROUP_GENERATION"), "0");
    }
  }
}

// A rank of a lost worker may still run (a partition): every rank
// restarts, even with a free slot elsewhere.
TEST_F(JobManagerRegroupTest, ARankOfALostWorkerRestartsEveryRank) {
  TestWorker w1, w2, w3;
  const std::string id = RunningJob(w1, w2);
  ASSERT_OK(Register(w3, "w3", 1));
  Silence(w2);
  Pass(absl::Seconds(6));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  EXPECT_EQ(Job(id).group_generation(), 0);
  EXPECT_FALSE(Announced(id, 1));
}

// A survivor says it lost its peer while the peer's worker's stream is
// broken: that worker is taken as lost at once, and every rank restarts;
// with every worker connected the peer's exit is awaited.
TEST_F(JobManagerRegroupTest, ASurvivorThatLostAPeerOnABrokenWorkerRestartsEveryRankAtOnce) {
  TestWorker w1, w2;
  const std::string id = RunningJob(w1, w2);
  manager_->OnPeerLost(id, 0, 0, 0, "gloo: connection closed by peer");
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Disconnect(w2);
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "a stream that broke is not yet a lost worker";
  manager_->OnPeerLost(id, 1, 0, 0, "of another attempt");
  manager_->OnPeerLost(id, 0, 1, 0, "of another group");
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  manager_->OnPeerLost(id, 0, 0, 0, "gloo: connection closed by peer");
  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::RESTARTING);
  EXPECT_EQ(job.root_cause().reason(), v1::WORKER_LOST);
  EXPECT_EQ(job.root_cause().message(),
            "rank 1 lost with worker w2 (its stream broke); then rank 0 lost a peer: gloo: "
            "connection closed by peer");
  EXPECT_EQ(Stops(w1), 1);
}

// A rank of a cordoned worker (a GPU's XID) is not started there again:
// every rank restarts, elsewhere.
TEST_F(JobManagerRegroupTest, ARankOfACordonedWorkerRestartsEveryRank) {
  TestWorker w1, w2;
  const std::string id = RunningJob(w1, w2);
  ASSERT_OK(manager_->Cordon("w2", "XID 79", "admin"));
  Killed(w2, id, 0, 1, 9);
  EXPECT_EQ(Job(id).group_generation(), 0);
  EXPECT_FALSE(Announced(id, 1));
  Pass(absl::Seconds(2));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
}

// Off: snapshots off in the spec, or the coordinator's timeout zero.
TEST_F(JobManagerRegroupTest, WithoutSnapshotsInMemoryEveryRankRestarts) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  v1::JobSpec spec = TrainerSpec(2, 3);
  spec.mutable_trainer()->set_snapshot_every_steps(0);
  const std::string id = Submit(spec);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Exited(w2, id, 0, 1, 1);
  Pass(absl::Seconds(2));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  EXPECT_FALSE(Announced(id, 1));
}

TEST_F(JobManagerRegroupTest, WithoutARegroupTimeoutEveryRankRestarts) {
  options_.rank_env.regroup_timeout = absl::ZeroDuration();
  Restart();
  TestWorker w1, w2;
  const std::string id = RunningJob(w1, w2);
  Exited(w2, id, 0, 1, 1);
  Pass(absl::Seconds(2));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
}

}  // namespace
}  // namespace ringmaster
