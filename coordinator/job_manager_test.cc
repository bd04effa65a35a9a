#include "coordinator/job_manager.h"

#include <cstdlib>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "coordinator/fake_worker_link.h"

namespace ringmaster {
namespace {

// A worker as the coordinator sees it: its stream (a FakeWorkerLink), its
// session, and the numbers of its rank events.
struct TestWorker {
  std::string id;
  std::string incarnation;  // its process; a new TestWorker is a new process
  FakeWorkerLink link;
  WorkerSession session;
  int64_t seq = 0;
  int64_t acked = 0;
};

class JobManagerTest : public ::testing::Test {
 protected:
  JobManagerTest() : rendezvous_(&clock_) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    db_path_ = std::string(tmp ? tmp : "/tmp") + "/" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    std::filesystem::remove(db_path_);
    membership_options_.heartbeat_timeout = absl::Seconds(5);
    membership_options_.worker_grace = absl::Seconds(3);
    options_.backoff.base = absl::Seconds(2);
    options_.random = [] { return 0.999999; };  // the longest wait of each back-off
    options_.rank_env = {"127.0.0.1:7070", "/ckpt"};
    Restart();
  }

  // A fresh manager over the same database, as after a coordinator restart.
  void Restart() {
    live_.clear();
    manager_.reset();
    membership_.reset();
    store_.reset();
    auto store = JobStore::Open(db_path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    membership_ = std::make_unique<WorkerMembership>(&clock_, membership_options_);
    manager_ = std::make_unique<JobManager>(store_.get(), &rendezvous_, membership_.get(),
                                            &clock_, options_);
    ASSERT_TRUE(manager_->Recover().ok());
  }

  static v1::RunningRank Running(const std::string& job, int attempt, int rank, int slot = 0) {
    v1::RunningRank r;
    *r.mutable_rank() = Ref(job, attempt, rank);
    r.set_slot(slot);
    return r;
  }

  absl::Status Register(TestWorker& w, const std::string& id, int slots,
                        std::vector<v1::RunningRank> running = {},
                        std::vector<v1::WorkerMessage> unacked = {},
                        const std::string& incarnation = "") {
    w.id = id;
    if (!incarnation.empty()) w.incarnation = incarnation;
    if (w.incarnation.empty()) w.incarnation = id + "-process-" + std::to_string(++processes_);
    v1::RegisterWorker r;
    r.set_worker_id(id);
    r.set_address(id + ".local:7080");
    r.set_slots(slots);
    r.set_incarnation(w.incarnation);
    for (int i = 0; i < 3; ++i) r.add_free_ports(40000 + static_cast<int>(id.back()) + 100 * i);
    for (auto& rank : running) *r.add_running() = rank;
    for (auto& m : unacked) *r.add_unacked() = m;
    int64_t ack = 0;
    absl::StatusOr<WorkerSession> session = manager_->RegisterWorker(&w.link, r, &ack);
    if (!session.ok()) return session.status();
    w.session = *session;
    w.acked = std::max(w.acked, ack);
    live_.insert(&w);
    return absl::OkStatus();
  }

  // Lets `d` pass a second at a time: every live worker heartbeats, then
  // the manager ticks.
  void Pass(absl::Duration d) {
    while (d > absl::ZeroDuration()) {
      const absl::Duration step = std::min(d, absl::Seconds(1));
      clock_.Advance(step);
      d -= step;
      for (TestWorker* w : live_) manager_->OnHeartbeat(w->session, v1::Heartbeat());
      manager_->Tick();
    }
  }
  // The worker stops heartbeating (its process is paused or gone).
  void Silence(TestWorker& w) { live_.erase(&w); }

  void Disconnect(TestWorker& w) {
    membership_->Disconnect(&w.link);
    live_.erase(&w);
  }

  static v1::RankRef Ref(const std::string& job, int attempt, int rank) {
    v1::RankRef ref;
    ref.set_job_id(job);
    ref.set_attempt(attempt);
    ref.set_rank(rank);
    return ref;
  }

  v1::WorkerMessage StartedEvent(TestWorker& w, const std::string& job, int attempt,
                                 int rank) {
    v1::WorkerMessage m;
    m.set_seq(++w.seq);
    *m.mutable_rank_started()->mutable_rank() = Ref(job, attempt, rank);
    m.mutable_rank_started()->set_pid(1000 + rank);
    return m;
  }

  v1::WorkerMessage ExitedEvent(TestWorker& w, const std::string& job, int attempt, int rank,
                                int code, int signal = 0, bool stopped = false) {
    v1::WorkerMessage m;
    m.set_seq(++w.seq);
    *m.mutable_rank_exited()->mutable_rank() = Ref(job, attempt, rank);
    m.mutable_rank_exited()->set_exit_code(code);
    m.mutable_rank_exited()->set_signal(signal);
    m.mutable_rank_exited()->set_stopped(stopped);
    return m;
  }

  void Deliver(TestWorker& w, const v1::WorkerMessage& m) {
    w.acked = std::max(w.acked, manager_->OnRankEvent(w.session, m));
  }
  void Started(TestWorker& w, const std::string& job, int attempt, int rank) {
    Deliver(w, StartedEvent(w, job, attempt, rank));
  }
  void Exited(TestWorker& w, const std::string& job, int attempt, int rank, int code,
              bool stopped = false) {
    Deliver(w, ExitedEvent(w, job, attempt, rank, code, 0, stopped));
  }
  void Killed(TestWorker& w, const std::string& job, int attempt, int rank, int signal) {
    Deliver(w, ExitedEvent(w, job, attempt, rank, 0, signal));
  }
  bool Heartbeat(TestWorker& w, std::vector<v1::RunningRank> running = {}) {
    v1::Heartbeat beat;
    for (auto& r : running) *beat.add_running() = r;
    return manager_->OnHeartbeat(w.session, beat);
  }

  std::string Submit(int ranks, int max_restarts = 0) {
    v1::JobSpec spec;
    spec.set_name("test");
    spec.set_ranks(ranks);
    spec.set_max_restarts(max_restarts);
    spec.add_command("true");
    return Submit(spec);
  }
  std::string Submit(const v1::JobSpec& spec) {
    auto id = manager_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  v1::Job Job(const std::string& id) { return manager_->Get(id).value(); }
  v1::StateChange Last(const std::string& id) { return *Job(id).history().rbegin(); }

  static std::vector<v1::StartRank> Starts(TestWorker& w) {
    std::vector<v1::StartRank> out;
    for (auto& m : w.link.Take()) {
      if (m.has_start_rank()) out.push_back(m.start_rank());
    }
    return out;
  }
  static int Stops(TestWorker& w) {
    int n = 0;
    for (auto& m : w.link.Take()) n += m.has_stop_job();
    return n;
  }

  FakeClock clock_;
  RendezvousStore rendezvous_;
  MembershipOptions membership_options_;
  JobManagerOptions options_;
  std::string db_path_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<WorkerMembership> membership_;
  std::unique_ptr<JobManager> manager_;
  std::set<TestWorker*> live_;
  int processes_ = 0;
};

TEST_F(JobManagerTest, JobRunsToSuccess) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 2).ok());
  w1.link.Take();
  const std::string id = Submit(2);
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  auto starts = Starts(w1);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[1].env().at("RANK"), "1");
  EXPECT_EQ(starts[1].env().at("MASTER_ADDR"), "w1.local");
  EXPECT_EQ(starts[1].env().at("MASTER_PORT"), std::to_string(40000 + '1'));
  EXPECT_EQ(starts[0].argv(0), "true");

  Started(w1, id, 0, 0);
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  Started(w1, id, 0, 1);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Exited(w1, id, 0, 0, 0);
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "rank 1 still runs";
  Exited(w1, id, 0, 1, 0);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::SUCCEEDED);
  std::vector<v1::Reason> reasons;
  for (auto& c : job.history()) reasons.push_back(c.reason());
  EXPECT_EQ(reasons, (std::vector<v1::Reason>{v1::SUBMITTED, v1::SCHEDULED,
                                              v1::RANKS_RUNNING, v1::RANKS_SUCCEEDED}));
  EXPECT_EQ(w1.acked, 4) << "every rank event acknowledged";
}

TEST_F(JobManagerTest, PlainExitWaitsBrieflyForABetterCauseThenFailsTheJob) {
  TestWorker w1, w2;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  ASSERT_TRUE(Register(w2, "w2", 1).ok());
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
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  ASSERT_TRUE(Register(w2, "w2", 1).ok());
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
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  ASSERT_TRUE(Register(w2, "w2", 1).ok());
  const std::string id = Submit(2, /*max_restarts=*/3);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Disconnect(w2);          // kill -9 of the worker: its stream breaks at once
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

TEST_F(JobManagerTest, WaitsForSlotsWithAReason) {
  TestWorker w1, w2;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  const std::string id = Submit(2);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_EQ(job.pending_reason(),
            "needs 2 slots, more than the 1 of all alive workers; waiting for "
            "workers to join");
  EXPECT_TRUE(Starts(w1).empty());
  ASSERT_TRUE(Register(w2, "w2", 1).ok());
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  EXPECT_EQ(Starts(w1).size(), 1u);
  EXPECT_EQ(Starts(w2).size(), 1u);
}

TEST_F(JobManagerTest, RestartsWithBackoffThenFails) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  const std::string id = Submit(1, /*max_restarts=*/1);
  Started(w1, id, 0, 0);
  Exited(w1, id, 0, 0, 1);
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  EXPECT_EQ(Job(id).restarts(), 1);
  Pass(absl::Milliseconds(1990));
  EXPECT_EQ(Job(id).state(), v1::RESTARTING) << "back-off not over";
  Pass(absl::Milliseconds(10));
  v1::Job job = Job(id);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.state(), v1::STARTING);
  auto starts = Starts(w1);
  ASSERT_FALSE(starts.empty());
  EXPECT_EQ(starts.back().env().at("TORCHELASTIC_RESTART_COUNT"), "1");
  Started(w1, id, 1, 0);
  Exited(w1, id, 0, 0, 1);  // a stale report of attempt 0 changes nothing
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Exited(w1, id, 1, 0, 7);
  job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.history().rbegin()->message(), "rank 0 exited with code 7 (after 1 restarts)");
}

TEST_F(JobManagerTest, SameFailureTwiceWithoutProgressFailsFast) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
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
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
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

TEST_F(JobManagerTest, StartTimeoutNamesTheRanksThatNeverStarted) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 3).ok());
  v1::JobSpec spec;
  spec.set_name("slow");
  spec.set_ranks(3);
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

TEST_F(JobManagerTest, HungTrainerRankIsNamedWithItsWorkerAndStep) {
  TestWorker w1, w2;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  ASSERT_TRUE(Register(w2, "w2", 1).ok());
  v1::JobSpec spec;
  spec.set_name("train");
  spec.set_ranks(2);
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
  beat(w1, 0, 40, 14);
  beat(w2, 1, 40, 4);
  clock_.Advance(absl::Seconds(1));
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::RANK_HUNG);
  EXPECT_EQ(Last(id).message(), "rank 1 on worker w2 made no progress for 10s (last step 40)");
}

TEST_F(JobManagerTest, CommandJobHangsOnlyWhenSilentAndOnlyWhenAsked) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 2).ok());
  v1::JobSpec spec;
  spec.set_name("quiet");
  spec.set_ranks(1);
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
  EXPECT_EQ(Job(on).state(), v1::FAILED);
  EXPECT_EQ(Last(on).message(), "rank 0 on worker w1 made no progress for 5s (no step reported)");
  for (int t = 0; t < 100; ++t) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(Heartbeat(w1, {Running(off, 0, 0, 0)}));
    manager_->Tick();
  }
  EXPECT_EQ(Job(off).state(), v1::RUNNING) << "no hang_timeout_s: off for command jobs";
}

TEST_F(JobManagerTest, LostWorkerFailsItsJob) {
  TestWorker w1, w2;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  ASSERT_TRUE(Register(w2, "w2", 1).ok());
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
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
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
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  EXPECT_EQ(Job(id).attempt(), 1);
}

TEST_F(JobManagerTest, DuplicateWorkerIdIsRefusedAndGetsNothing) {
  TestWorker real, impostor;
  ASSERT_TRUE(Register(real, "w1", 1).ok());
  absl::Status refused = Register(impostor, "w1", 1, {}, {}, "another-process");
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists);
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
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  const std::string id = Submit(1);
  const WorkerSession old = w1.session;
  Disconnect(w1);
  ASSERT_TRUE(Register(w1, "w1", 1, {Running(id, 0, 0)}).ok());
  v1::WorkerMessage started = StartedEvent(w1, id, 0, 0);
  EXPECT_EQ(manager_->OnRankEvent(old, started), 0) << "not acknowledged";
  EXPECT_FALSE(manager_->OnHeartbeat(old, v1::Heartbeat()));
  EXPECT_EQ(Job(id).ranks(0).state(), v1::RANK_ASSIGNED);
  EXPECT_EQ(manager_->OnRankEvent(w1.session, started), started.seq());
  EXPECT_EQ(Job(id).ranks(0).state(), v1::RANK_RUNNING);
}

TEST_F(JobManagerTest, ExitHeldAcrossACoordinatorRestartIsAppliedOnce) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 2).ok());
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  Started(w1, id, 0, 1);
  Exited(w1, id, 0, 0, 0);
  // The exit of rank 1 is written as the coordinator dies: never applied,
  // never acknowledged, so the worker still holds it.
  v1::WorkerMessage exit = ExitedEvent(w1, id, 0, 1, 0);
  Restart();
  TestWorker again;
  ASSERT_TRUE(Register(again, "w1", 2, {}, {exit}, w1.incarnation).ok());
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
    ASSERT_TRUE(Register(w1, "w1", 1).ok());
    lost = Submit(1);
    Started(w1, lost, 0, 0);
    queued = Submit(1);
    EXPECT_EQ(Job(queued).state(), v1::PENDING);
  }
  Restart();
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 1, {}, {}, "restarted-process").ok());
  EXPECT_EQ(Job(lost).state(), v1::FAILED);
  EXPECT_EQ(Last(lost).message(), "rank 0 was gone when worker w1 registered again");
  EXPECT_EQ(Job(queued).state(), v1::STARTING)
      << "placed once the worker was reconciled, not marked lost: "
      << Last(queued).message();
  EXPECT_EQ(Starts(w1).size(), 1u);
}

TEST_F(JobManagerTest, StartLostWithTheCoordinatorIsSentAgain) {
  std::string id;
  {
    TestWorker w1;
    ASSERT_TRUE(Register(w1, "w1", 1).ok());
    id = Submit(1);  // STARTING stored; the coordinator dies before the start goes out
  }
  Restart();
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 1, {}, {}, "w1-process-1").ok());
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  auto starts = Starts(w1);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].rank().job_id(), id);
  Started(w1, id, 0, 0);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(JobManagerTest, ElasticJobStartsSmallerAndRegrowsWhenRoomLasts) {
  TestWorker w1, w2, w3;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  ASSERT_TRUE(Register(w2, "w2", 1).ok());
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
  ASSERT_TRUE(Register(w3, "w3", 1).ok());
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
    ASSERT_TRUE(Register(*w, "w" + std::to_string(w == &w1 ? 1 : w == &w2 ? 2 : 3), 1).ok());
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

TEST_F(JobManagerTest, CancelStopsRanks) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 2).ok());
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  w1.link.Take();
  auto job = manager_->Cancel(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::CANCELLED);
  EXPECT_EQ(Stops(w1), 1);
  EXPECT_EQ(manager_->Cancel(id).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->Cancel("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, BadSpecStoresNothing) {
  v1::JobSpec spec;
  spec.set_name("x");
  spec.set_ranks(0);
  spec.add_command("true");
  EXPECT_EQ(manager_->Submit(spec).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(manager_->List().empty());
  Restart();
  EXPECT_TRUE(manager_->List().empty());
}

TEST_F(JobManagerTest, RestartKeepsJobsAndReattachesRunningRanks) {
  const std::string done = [&] {
    TestWorker w1;
    EXPECT_TRUE(Register(w1, "w1", 2).ok());
    std::string id = Submit(1);
    Started(w1, id, 0, 0);
    Exited(w1, id, 0, 0, 0);
    Disconnect(w1);
    return id;
  }();
  std::string running;
  {
    TestWorker w1;
    ASSERT_TRUE(Register(w1, "w1", 2).ok());
    running = Submit(2);
    Started(w1, running, 0, 0);
    Started(w1, running, 0, 1);
    Disconnect(w1);
  }
  const v1::Job before = Job(running);
  Restart();
  auto jobs = manager_->List();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id(), done);
  EXPECT_EQ(jobs[0].state(), v1::SUCCEEDED);
  EXPECT_EQ(jobs[0].history_size(), 4);
  EXPECT_EQ(jobs[1].history_size(), before.history_size());

  TestWorker again;
  ASSERT_TRUE(Register(again, "w1", 2, {Running(running, 0, 0, 0), Running(running, 0, 1, 1)})
                  .ok());
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
  EXPECT_EQ(Stops(again), 0);
  Exited(again, running, 0, 0, 0);
  Exited(again, running, 0, 1, 0);
  EXPECT_EQ(Job(running).state(), v1::SUCCEEDED);
}

TEST_F(JobManagerTest, CancelWhileAWorkerIsAwayStopsItsRanksWhenItReturns) {
  std::string id;
  {
    TestWorker w1, w2;
    ASSERT_TRUE(Register(w1, "w1", 1).ok());
    ASSERT_TRUE(Register(w2, "w2", 1).ok());
    id = Submit(2);
    Started(w1, id, 0, 0);
    Started(w2, id, 0, 1);
  }
  Restart();
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 1, {Running(id, 0, 0)}).ok());
  auto workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].state(), v1::WORKER_STATE_ALIVE);
  EXPECT_EQ(workers[1].state(), v1::WORKER_STATE_SUSPECT) << "w2 is not back yet";

  ASSERT_TRUE(manager_->Cancel(id).ok());
  TestWorker w2;
  ASSERT_TRUE(Register(w2, "w2", 1, {Running(id, 0, 1)}).ok());
  EXPECT_EQ(Stops(w2), 1) << "the stop w2 missed is sent when it returns";
  EXPECT_EQ(Job(id).ranks(1).state(), v1::RANK_RUNNING)
      << "the rank still runs until w2 reports its exit";
  Exited(w2, id, 0, 1, 0, /*stopped=*/true);
  EXPECT_EQ(Job(id).ranks(1).state(), v1::RANK_STOPPED);
}

TEST_F(JobManagerTest, RanksNotFoundAfterRestartAreLost) {
  std::string id;
  {
    TestWorker w1;
    ASSERT_TRUE(Register(w1, "w1", 1).ok());
    id = Submit(1);
    Started(w1, id, 0, 0);
  }
  Restart();
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "the worker has time to come back";
  clock_.Advance(absl::Seconds(5));
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::WORKER_LOST);
}

TEST_F(JobManagerTest, WatchSeesEveryChange) {
  TestWorker w1;
  ASSERT_TRUE(Register(w1, "w1", 1).ok());
  const std::string id = Submit(1);
  std::vector<v1::JobState> seen;
  auto watch = manager_->Watch(id, [&](const v1::Job& j) { seen.push_back(j.state()); });
  ASSERT_TRUE(watch.ok());
  Started(w1, id, 0, 0);
  Exited(w1, id, 0, 0, 0);
  manager_->Unwatch(*watch);
  EXPECT_EQ(seen.front(), v1::STARTING);
  EXPECT_EQ(seen.back(), v1::SUCCEEDED);
}

}  // namespace
}  // namespace ringmaster
