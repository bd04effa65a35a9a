// JobManager: what workers hold of jobs in memory, where each restart
// resumed from and what it cost, and workers told to free what they hold
// when a job ends.
#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

v1::HeldSnapshots Held(const std::string& job, int rank, std::vector<int64_t> steps,
                       int attempt = 0) {
  v1::HeldSnapshots held;
  held.set_job_id(job);
  held.set_rank(rank);
  held.set_attempt(attempt);
  held.set_world_size(2);
  held.set_bytes(4096);
  for (int64_t s : steps) held.add_steps(s);
  return held;
}

class JobManagerSnapshotsTest : public JobManagerTest {
 protected:
  // A heartbeat of `w` with its running ranks, `held` (which its later
  // heartbeats list too) and rank progress.
  void Beat(TestWorker& w, std::vector<v1::HeldSnapshots> held,
            std::vector<v1::RankProgress> progress = {}) {
    w.held = held;
    v1::Heartbeat beat;
    for (const auto& [key, rank] : w.running) *beat.add_running() = rank;
    for (auto& h : held) *beat.add_snapshots() = h;
    for (auto& p : progress) *beat.add_progress() = p;
    manager_->OnHeartbeat(w.session, beat);
  }
  // `spec` submitted and started: rank 0 on w1, rank 1 on w2 (registered
  // here, one slot each). Returns the job's id.
  std::string StartOnTwo(TestWorker& w1, TestWorker& w2, const v1::JobSpec& spec) {
    EXPECT_OK(Register(w1, "w1", 1));
    EXPECT_OK(Register(w2, "w2", 1));
    const std::string id = Submit(spec);
    Started(w1, id, 0, 0);
    Started(w2, id, 0, 1);
    return id;
  }
  // Rank 1 killed, rank 0 exited, the back-off passed: attempt 1's ranks
  // started where attempt 0's ran.
  void KillRank1AndRestart(TestWorker& w1, TestWorker& w2, const std::string& id) {
    Killed(w2, id, 0, 1, 9);
    Exited(w1, id, 0, 0, 1);
    EXPECT_EQ(Job(id).state(), v1::RESTARTING);
    Pass(absl::Seconds(3));  // the back-off
    EXPECT_EQ(Job(id).attempt(), 1);
    Started(w1, id, 1, 0);
    Started(w2, id, 1, 1);
  }
  static v1::RankProgress Progress(const std::string& job, int attempt, int rank, int64_t step,
                                   const std::string& resumed_from = "", int64_t resumed_step = 0) {
    v1::RankProgress p;
    *p.mutable_rank() = Ref(job, attempt, rank);
    p.mutable_progress()->set_step(step);
    p.mutable_progress()->set_resumed_from(resumed_from);
    p.mutable_progress()->set_resumed_step(resumed_step);
    return p;
  }
};

TEST_F(JobManagerSnapshotsTest, HeartbeatsGiveTheJobsConsistentStep) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string id = Submit(TrainerSpec(2, 0));
  for (const v1::StartRank& start : Starts(w1)) EXPECT_TRUE(start.snapshot_segment());
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Beat(w1, {Held(id, 0, {11, 10})});
  EXPECT_EQ(Job(id).snapshots().consistent_step(), 0) << "rank 1's are not known yet";
  Beat(w2, {Held(id, 1, {10, 9})});
  EXPECT_EQ(Job(id).snapshots().consistent_step(), 10);
  EXPECT_EQ(Job(id).snapshots().newest_step(), 11);
  EXPECT_EQ(Job(id).snapshots().bytes_per_rank(), 4096);
  Beat(w2, {});  // w2 freed its segment
  EXPECT_EQ(Job(id).snapshots().consistent_step(), 0);
}

// w1 runs rank 0 and is lost; w2 runs rank 1 and keeps rank 0's replica.
// The new attempt keeps rank 1 on w2, where its segment is; rank 0, on w3,
// is told to fetch from w2, and what w1 held no longer counts.
TEST_F(JobManagerSnapshotsTest, ARankOnANewWorkerIsToldWhereItsNewestSnapshotIs) {
  TestWorker w1, w2, w3;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string id = Submit(TrainerSpec(2, 3));
  const std::vector<v1::StartRank> first = Starts(w1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].rank().rank(), 0);
  EXPECT_EQ(first[0].replica_to().worker_id(), "w2");
  EXPECT_FALSE(first[0].has_fetch_from());
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  ASSERT_OK(Register(w3, "w3", 1));
  v1::HeldSnapshots replica = Held(id, 0, {20, 19});
  replica.set_replica(true);
  Beat(w1, {Held(id, 0, {21, 20})});
  Beat(w2, {Held(id, 1, {21, 20}), replica});
  EXPECT_EQ(Job(id).snapshots().consistent_step(), 21);
  EXPECT_EQ(Job(id).snapshots().replica_step(), 0) << "rank 1 has no replica";

  Silence(w1);
  Pass(absl::Seconds(5));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  EXPECT_EQ(Job(id).snapshots().consistent_step(), 0) << "w1's segment went with it";
  Exited(w2, id, 0, 1, 1);  // rank 1, stopped
  (void)Starts(w2);
  (void)Starts(w3);
  Pass(absl::Seconds(2));  // the back-off
  std::vector<v1::StartRank> starts = Starts(w2);
  for (const v1::StartRank& s : Starts(w3)) starts.push_back(s);
  ASSERT_EQ(starts.size(), 2u);
  // Rank 1 stays with its segment on w2; rank 0, on w3, fetches its
  // replica from w2.
  const v1::Job job = Job(id);
  EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  EXPECT_EQ(job.ranks(0).worker_id(), "w3");
  for (const v1::StartRank& start : starts) {
    EXPECT_EQ(start.rank().attempt(), 1);
    const std::string& worker = job.ranks(start.rank().rank()).worker_id();
    if (worker == "w3") {
      EXPECT_EQ(start.fetch_from().worker_id(), "w2");
      EXPECT_EQ(start.fetch_from().step(), start.rank().rank() == 0 ? 20 : 21);
      EXPECT_FALSE(start.fetch_from().address().empty());
    } else {
      EXPECT_FALSE(start.has_fetch_from()) << "w2 holds rank " << start.rank().rank() << " itself";
    }
  }
}

TEST_F(JobManagerSnapshotsTest, ARankThatKeepsNoSnapshotsSaysWhy) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(TrainerSpec(1, 0));
  Started(w1, id, 0, 0);
  v1::RankProgress p = Progress(id, 0, 0, 1);
  p.mutable_progress()->set_snapshots_off("a snapshot of this model is 900.0 MiB");
  Beat(w1, {}, {p});
  EXPECT_EQ(Job(id).snapshots().off(), "rank 0: a snapshot of this model is 900.0 MiB");
}

TEST_F(JobManagerSnapshotsTest, ARestartSaysWhereItResumedFromAndWhatItCost) {
  TestWorker w1, w2;
  const std::string id = StartOnTwo(w1, w2, TrainerSpec(2, 3));
  Beat(w1, {Held(id, 0, {101, 100})}, {Progress(id, 0, 0, 99)});
  Beat(w2, {Held(id, 1, {101, 100})});
  ASSERT_NO_FATAL_FAILURE(KillRank1AndRestart(w1, w2, id));
  clock_.Advance(absl::Milliseconds(500));
  Beat(w1, {}, {Progress(id, 1, 0, 102, "memory", 101)});
  const v1::Job job = Job(id);
  EXPECT_EQ(job.resumed().attempt(), 1);
  EXPECT_EQ(job.resumed().from(), "memory");
  EXPECT_EQ(job.resumed().step(), 101);
  EXPECT_EQ(job.resumed().steps_redone(), 0);
  EXPECT_DOUBLE_EQ(job.resumed().seconds(), 3.5);
  EXPECT_EQ(Last(id).reason(), v1::RESUMED);
  EXPECT_EQ(Last(id).message(),
            "resumed at step 101 from memory on its workers, 0 steps redone; first step 3.5 s "
            "after attempt 0 ended");
  // Said once per attempt.
  Beat(w1, {}, {Progress(id, 1, 0, 103, "memory", 101)});
  EXPECT_EQ(Job(id).history_size(), job.history_size());

  // Goodput: the restart cost 3.5 s, the 10 s since are productive.
  clock_.Advance(absl::Seconds(10));
  const v1::Goodput g = Job(id).goodput();
  EXPECT_DOUBLE_EQ(g.lost_seconds().at("restart"), 3.5);
  EXPECT_EQ(g.lost_seconds().count("redone"), 0u);
  EXPECT_DOUBLE_EQ(g.productive_seconds(), 10);
  EXPECT_NEAR(g.ratio(), g.productive_seconds() / g.wall_seconds(), 1e-9);
}

// A program (ringmaster.checkpoint) counts as running once its ranks are;
// where it resumed from is noted when its rank 0 first says, once.
TEST_F(JobManagerSnapshotsTest, AProgramSaysWhereItResumedFromWhenItFirstReports) {
  TestWorker w1, w2;
  v1::JobSpec spec;
  spec.set_name("script");
  spec.set_ranks(2);
  spec.set_max_restarts(3);
  spec.add_command("python3");
  const std::string id = StartOnTwo(w1, w2, spec);
  Beat(w1, {}, {Progress(id, 0, 0, 40)});
  ASSERT_NO_FATAL_FAILURE(KillRank1AndRestart(w1, w2, id));
  ASSERT_EQ(Job(id).goodput().phase(), v1::Goodput::RUNNING);
  Beat(w1, {}, {Progress(id, 1, 0, 41, "replica", 40)});
  const v1::Job job = Job(id);
  EXPECT_EQ(job.resumed().attempt(), 1);
  EXPECT_EQ(job.resumed().from(), "replica");
  EXPECT_EQ(job.resumed().step(), 40);
  EXPECT_EQ(Last(id).reason(), v1::RESUMED);
  EXPECT_EQ(Last(id).message().rfind(
                "resumed at step 40 from memory, with snapshots fetched from peers' replicas", 0),
            0u)
      << Last(id).message();
  Beat(w1, {}, {Progress(id, 1, 0, 42, "replica", 40)});
  EXPECT_EQ(Job(id).history_size(), job.history_size());
}

// A rank whose state does not fit its segment: the restart reads disk, and
// says so.
TEST_F(JobManagerSnapshotsTest, WithSnapshotsOffARestartSaysItResumedFromDisk) {
  TestWorker w1, w2;
  const std::string id = StartOnTwo(w1, w2, TrainerSpec(2, 3));
  v1::RankProgress off = Progress(id, 0, 0, 700);
  off.mutable_progress()->set_snapshots_off("a snapshot of this model is 3.4 MiB");
  Beat(w1, {}, {off});
  ASSERT_NO_FATAL_FAILURE(KillRank1AndRestart(w1, w2, id));
  v1::RankProgress resumed = Progress(id, 1, 0, 501, "disk", 500);
  resumed.mutable_progress()->set_snapshots_off("a snapshot of this model is 3.4 MiB");
  Beat(w1, {}, {resumed});
  EXPECT_EQ(Job(id).resumed().from(), "disk");
  EXPECT_EQ(Last(id).reason(), v1::RESUMED);
}

TEST_F(JobManagerSnapshotsTest, GoodputCountsStepsRedoneAndCheckpointStalls) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(TrainerSpec(1, 3));
  Started(w1, id, 0, 0);
  clock_.Advance(absl::Seconds(2));
  Beat(w1, {}, {Progress(id, 0, 0, 1)});  // first step: 2 s of start-up
  clock_.Advance(absl::Seconds(100));
  v1::RankProgress stalled = Progress(id, 0, 0, 1001);
  stalled.mutable_progress()->set_checkpoint_stall_seconds(4);
  Beat(w1, {}, {stalled});
  Killed(w1, id, 0, 0, 9);
  Pass(absl::Seconds(3));
  Started(w1, id, 1, 0);
  // Resumed from disk at step 901: 100 of the 1000 steps in 100 s redone.
  Beat(w1, {}, {Progress(id, 1, 0, 902, "disk", 901)});
  const v1::Goodput g = Job(id).goodput();
  EXPECT_DOUBLE_EQ(g.lost_seconds().at("startup"), 2);
  EXPECT_DOUBLE_EQ(g.lost_seconds().at("checkpoint_stall"), 4);
  EXPECT_DOUBLE_EQ(g.lost_seconds().at("restart"), 3);
  EXPECT_DOUBLE_EQ(g.lost_seconds().at("redone"), 10);
  EXPECT_DOUBLE_EQ(g.productive_seconds(), 100 - 4 - 10);
  EXPECT_DOUBLE_EQ(g.wall_seconds(), 105);
}

TEST_F(JobManagerSnapshotsTest, AResumeFromDiskCountsTheStepsRedone) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(TrainerSpec(1, 3));
  Started(w1, id, 0, 0);
  Beat(w1, {}, {Progress(id, 0, 0, 345)});
  Killed(w1, id, 0, 0, 9);
  Pass(absl::Seconds(3));
  Started(w1, id, 1, 0);
  Beat(w1, {}, {Progress(id, 1, 0, 1, "disk", 0)});
  EXPECT_EQ(Job(id).resumed().from(), "disk");
  EXPECT_EQ(Job(id).resumed().steps_redone(), 345);
}

TEST_F(JobManagerSnapshotsTest, WorkersFreeWhatTheyHoldOnceTheJobHasEnded) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string id = Submit(TrainerSpec(2, 0));
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  w1.link.Take();
  w2.link.Take();
  Exited(w1, id, 0, 0, 0);
  Exited(w2, id, 0, 1, 0);
  ASSERT_EQ(Job(id).state(), v1::SUCCEEDED);
  Pass(absl::Seconds(1));
  for (TestWorker* w : {&w1, &w2}) {
    int ended = 0;
    for (const v1::CoordinatorMessage& m : w->link.Take()) {
      ended += m.has_job_ended() && m.job_ended().job_id() == id;
    }
    EXPECT_EQ(ended, 1) << w->id;
  }
}

}  // namespace
}  // namespace ringmaster
