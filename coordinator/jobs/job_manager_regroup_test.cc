// JobManager: a failed rank of a built-in trainer job replaced alone, or
// an elastic job going on without it, while the others keep their
// processes, and every rank restarted when that does not work out.
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

  // The members group `generation` was announced with ("0,2").
  std::string Members(const std::string& id, int generation) {
    return rendezvous_.Get({id, 0}, GroupKey(generation)).value_or("(none)");
  }

  // An elastic trainer job of `ranks` ranks (at least `min_ranks`), rank r
  // running on workers[r]; rank 0 at step 20.
  std::string RunningElasticJob(const std::vector<TestWorker*>& workers, int ranks, int min_ranks) {
    v1::JobSpec spec = TrainerSpec(ranks, 3);
    spec.set_min_ranks(min_ranks);
    const std::string id = Submit(spec);
    for (int r = 0; r < ranks; ++r) {
      (void)Starts(*workers[r]);
      Started(*workers[r], id, 0, r);
    }
    Report(*workers[0], id, 0, 20, 0);
    EXPECT_EQ(Job(id).state(), v1::RUNNING);
    return id;
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

// An elastic job whose rank cannot start again where it was (its worker
// cordoned) goes on without it: the others keep their processes in a
// smaller group, numbered anew, and the job ends when they do.
TEST_F(JobManagerRegroupTest, AnElasticJobGoesOnWithoutARankItCannotStartAgain) {
  TestWorker w1, w2, w3;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  ASSERT_OK(Register(w3, "w3", 1));
  const std::string id = RunningElasticJob({&w1, &w2, &w3}, 3, 2);
  ASSERT_OK(manager_->Cordon("w1", "XID 79", "admin"));
  Killed(w1, id, 0, 0, 9);

  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_EQ(job.group_generation(), 1);
  EXPECT_EQ(job.world_size(), 2);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.ranks(0).state(), v1::RANK_FAILED);
  EXPECT_EQ(job.ranks(0).left_generation(), 1);
  EXPECT_EQ(job.ranks(1).left_generation(), 0);
  EXPECT_EQ(Members(id, 1), "1,2");
  EXPECT_EQ(Last(id).reason(), v1::GROUP_SHRUNK);
  EXPECT_EQ(Last(id).message(),
            "rank 0 was killed by signal 9: 2 ranks go on without rank 0, each in its own "
            "process (group 1 of attempt 0, 3 -> 2 ranks, min_ranks 2; 1 of 3 restarts used)");
  EXPECT_EQ(Stops(w2) + Stops(w3), 0) << "the others keep their processes";
  EXPECT_TRUE(Starts(w1).empty()) << "nothing starts on the cordoned worker";
  EXPECT_EQ(ListWorkersUsed("w1"), 0) << "its slot is free";

  // Rank 1 speaks for the new group, rank 0 gone.
  Report(w2, id, 1, 21, 1, "memory", 20, clock_.Now());
  job = Job(id);
  EXPECT_EQ(job.regroup_since_unix_ms(), 0);
  EXPECT_EQ(job.resumed().generation(), 1);
  EXPECT_EQ(job.progress().step(), 21);
  Pass(absl::Seconds(120));
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "past --regroup-timeout, the group formed";
  Exited(w2, id, 0, 1, 0);
  Exited(w3, id, 0, 2, 0);
  job = Job(id);
  EXPECT_EQ(job.state(), v1::SUCCEEDED);
  EXPECT_EQ(job.history(job.history_size() - 1).message(), "all 2 ranks exited with code 0");
}

// A rank of a cordoned worker leaves with every other rank there; a rank
// exiting on a healthy worker is replaced instead, never left out.
TEST_F(JobManagerRegroupTest, ARankLeavesWithTheOtherRanksOfItsWorker) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 2));
  ASSERT_OK(Register(w2, "w2", 2));
  v1::JobSpec spec = TrainerSpec(4, 3);
  spec.set_min_ranks(2);
  const std::string id = Submit(spec);
  std::map<int, TestWorker*> on;
  for (TestWorker* w : {&w1, &w2}) {
    for (const v1::StartRank& start : Starts(*w)) on[start.rank().rank()] = w;
  }
  ASSERT_EQ(on.size(), 4u);
  for (const auto& [rank, w] : on) Started(*w, id, 0, rank);
  int on_w1 = -1, other_on_w1 = -1;
  for (const auto& [rank, w] : on) {
    if (w == &w1) (on_w1 < 0 ? on_w1 : other_on_w1) = rank;
  }
  ASSERT_OK(manager_->Cordon("w1", "XID 79", "admin"));
  Killed(w1, id, 0, on_w1, 9);
  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.world_size(), 2);
  EXPECT_EQ(job.ranks(on_w1).left_generation(), 1);
  EXPECT_EQ(job.ranks(other_on_w1).left_generation(), 1) << "its worker's other rank";
  EXPECT_EQ(Stops(w2), 0);
}

// A lost worker's ranks leave together; below min_ranks every rank
// restarts instead.
TEST_F(JobManagerRegroupTest, AnElasticJobGoesOnWithoutALostWorkersRanks) {
  TestWorker w1, w2, w3;
  ASSERT_OK(Register(w1, "w1", 2));
  ASSERT_OK(Register(w2, "w2", 1));
  ASSERT_OK(Register(w3, "w3", 1));
  v1::JobSpec spec = TrainerSpec(4, 3);
  spec.set_min_ranks(2);
  const std::string id = Submit(spec);
  std::map<int, TestWorker*> on;
  for (TestWorker* w : {&w1, &w2, &w3}) {
    for (const v1::StartRank& start : Starts(*w)) on[start.rank().rank()] = w;
  }
  ASSERT_EQ(on.size(), 4u);
  for (const auto& [rank, w] : on) Started(*w, id, 0, rank);
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  std::vector<int> on_w1;
  for (const auto& [rank, w] : on) {
    if (w == &w1) on_w1.push_back(rank);
  }
  ASSERT_EQ(on_w1.size(), 2u);

  Silence(w1);
  Pass(absl::Seconds(6));
  v1::Job job = Job(id);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.root_cause().message();
  EXPECT_EQ(job.world_size(), 2);
  EXPECT_EQ(job.ranks(on_w1[0]).left_generation(), 1);
  EXPECT_EQ(job.ranks(on_w1[1]).left_generation(), 1);
  EXPECT_EQ(Last(id).reason(), v1::GROUP_SHRUNK);
  EXPECT_TRUE(absl::StrContains(Last(id).message(), "worker w1 lost: "));
  std::vector<int> members;
  ASSERT_TRUE(ParseGroupValue(Members(id, 1), &members));
  EXPECT_EQ(members.size(), 2u);
  EXPECT_EQ(Stops(w2) + Stops(w3), 0);

  // One more rank lost leaves one, below min_ranks: every rank restarts.
  Report(*on[members[0]], id, members[0], 21, 1, "memory", 20, clock_.Now());
  Silence(*on[members[1]]);
  Pass(absl::Seconds(6));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
}

// A survivor that lost its peers on a worker whose stream broke: an
// elastic job goes on without that worker's ranks at once.
TEST_F(JobManagerRegroupTest, AnElasticSurvivorThatLostAPeerOnABrokenWorkerGoesOnWithoutIt) {
  TestWorker w1, w2, w3;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  ASSERT_OK(Register(w3, "w3", 1));
  const std::string id = RunningElasticJob({&w1, &w2, &w3}, 3, 1);
  Disconnect(w3);
  manager_->OnPeerLost(id, 0, 0, 1, "gloo: connection closed by peer");
  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.ranks(2).left_generation(), 1);
  EXPECT_EQ(Members(id, 1), "0,1");
  EXPECT_EQ(job.root_cause().reason(), v1::WORKER_LOST);
  EXPECT_EQ(job.root_cause().message(),
            "rank 2 lost with worker w3 (its stream broke); then rank 1 lost a peer: gloo: "
            "connection closed by peer");
}

}  // namespace
}  // namespace ringmaster
