#include "coordinator/job_manager.h"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "coordinator/fake_worker_link.h"

namespace ringmaster {
namespace {

class JobManagerTest : public ::testing::Test {
 protected:
  JobManagerTest() : rendezvous_(&clock_) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    db_path_ = std::string(tmp ? tmp : "/tmp") + "/" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name() +
               ".db";
    std::filesystem::remove(db_path_);
    options_.heartbeat_timeout = absl::Seconds(10);
    options_.restart_backoff_initial = absl::Seconds(2);
    options_.rank_env = {"127.0.0.1:7070", "/ckpt"};
    Restart();
  }

  // A fresh manager over the same database, as after a coordinator restart.
  void Restart() {
    manager_.reset();
    store_.reset();
    auto store = JobStore::Open(db_path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    manager_ = std::make_unique<JobManager>(store_.get(), &rendezvous_, &clock_, options_);
    ASSERT_TRUE(manager_->Recover().ok());
  }

  void Send(FakeWorkerLink& link, const v1::WorkerMessage& m) {
    ASSERT_TRUE(manager_->OnWorkerMessage(&link, m).ok());
  }

  void Register(FakeWorkerLink& link, const std::string& id, int slots,
                std::vector<v1::RankRef> running = {}) {
    v1::WorkerMessage m;
    auto* r = m.mutable_register_();
    r->set_worker_id(id);
    r->set_address(id + ".local:7080");
    r->set_slots(slots);
    r->add_free_ports(40000 + static_cast<int>(id.back()));
    for (auto& ref : running) *r->add_running() = ref;
    Send(link, m);
  }

  static v1::RankRef Ref(const std::string& job, int attempt, int rank) {
    v1::RankRef ref;
    ref.set_job_id(job);
    ref.set_attempt(attempt);
    ref.set_rank(rank);
    return ref;
  }

  void Started(FakeWorkerLink& link, const std::string& job, int attempt, int rank) {
    v1::WorkerMessage m;
    *m.mutable_rank_started()->mutable_rank() = Ref(job, attempt, rank);
    m.mutable_rank_started()->set_pid(1000 + rank);
    Send(link, m);
  }

  void Exited(FakeWorkerLink& link, const std::string& job, int attempt, int rank,
              int code, bool stopped = false) {
    v1::WorkerMessage m;
    *m.mutable_rank_exited()->mutable_rank() = Ref(job, attempt, rank);
    m.mutable_rank_exited()->set_exit_code(code);
    m.mutable_rank_exited()->set_stopped(stopped);
    Send(link, m);
  }

  std::string Submit(int ranks, int max_restarts = 0) {
    v1::JobSpec spec;
    spec.set_name("test");
    spec.set_ranks(ranks);
    spec.set_max_restarts(max_restarts);
    spec.add_command("true");
    auto id = manager_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  v1::Job Job(const std::string& id) { return manager_->Get(id).value(); }

  static std::vector<v1::StartRank> Starts(FakeWorkerLink& link) {
    std::vector<v1::StartRank> out;
    for (auto& m : link.Take()) {
      if (m.has_start_rank()) out.push_back(m.start_rank());
    }
    return out;
  }
  static int Stops(FakeWorkerLink& link) {
    int n = 0;
    for (auto& m : link.Take()) n += m.has_stop_job();
    return n;
  }

  FakeClock clock_;
  RendezvousStore rendezvous_;
  JobManagerOptions options_;
  std::string db_path_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobManager> manager_;
};

TEST_F(JobManagerTest, JobRunsToSuccess) {
  FakeWorkerLink w1;
  Register(w1, "w1", 2);
  w1.Take();
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
}

TEST_F(JobManagerTest, FailingRankFailsTheJobAndStopsTheOthers) {
  FakeWorkerLink w1, w2;
  Register(w1, "w1", 1);
  Register(w2, "w2", 1);
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  w1.Take();
  w2.Take();
  Exited(w2, id, 0, 1, 3);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.history().rbegin()->reason(), v1::RANK_EXITED);
  EXPECT_EQ(job.history().rbegin()->message(), "rank 1 exited with code 3");
  EXPECT_EQ(Stops(w1), 1) << "rank 0 must be told to stop";
  Exited(w1, id, 0, 0, 0, /*stopped=*/true);
  EXPECT_EQ(Job(id).ranks(0).state(), v1::RANK_STOPPED);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
}

TEST_F(JobManagerTest, WaitsForSlotsWithAReason) {
  FakeWorkerLink w1, w2;
  Register(w1, "w1", 1);
  const std::string id = Submit(2);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_EQ(job.pending_reason(),
            "needs 2 slots, more than the 1 of all alive workers; waiting for "
            "workers to join");
  EXPECT_TRUE(Starts(w1).empty());
  Register(w2, "w2", 1);
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  EXPECT_EQ(Starts(w1).size(), 1u);
  EXPECT_EQ(Starts(w2).size(), 1u);
}

TEST_F(JobManagerTest, RestartsWithBackoffThenFails) {
  FakeWorkerLink w1;
  Register(w1, "w1", 1);
  const std::string id = Submit(1, /*max_restarts=*/1);
  Started(w1, id, 0, 0);
  Exited(w1, id, 0, 0, 1);
  EXPECT_EQ(Job(id).state(), v1::RESTARTING);
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::RESTARTING) << "back-off not over";
  clock_.Advance(absl::Seconds(2));
  manager_->Tick();
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
  EXPECT_EQ(job.history().rbegin()->message(),
            "rank 0 exited with code 7 (after 1 restarts)");
}

TEST_F(JobManagerTest, LostWorkerFailsItsJob) {
  FakeWorkerLink w1, w2;
  Register(w1, "w1", 1);
  Register(w2, "w2", 1);
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  clock_.Advance(absl::Seconds(6));
  Send(w1, [] { v1::WorkerMessage m; m.mutable_heartbeat(); return m; }());
  clock_.Advance(absl::Seconds(6));
  manager_->Tick();  // w2 silent for 12 s, w1 for 6 s
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.history().rbegin()->reason(), v1::WORKER_LOST);
  EXPECT_NE(job.history().rbegin()->message().find("rank 1 lost: worker w2"),
            std::string::npos);
  auto workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].state(), v1::WORKER_STATE_ALIVE);
  EXPECT_EQ(workers[1].state(), v1::WORKER_STATE_LOST);
}

TEST_F(JobManagerTest, CancelStopsRanks) {
  FakeWorkerLink w1;
  Register(w1, "w1", 2);
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  w1.Take();
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
    FakeWorkerLink w1;
    Register(w1, "w1", 2);
    std::string id = Submit(1);
    Started(w1, id, 0, 0);
    Exited(w1, id, 0, 0, 0);
    return id;
  }();
  std::string running;
  {
    FakeWorkerLink w1;
    Register(w1, "w1", 2);
    running = Submit(2);
    Started(w1, running, 0, 0);
    Started(w1, running, 0, 1);
    manager_->OnWorkerDisconnected(&w1);
  }
  const v1::Job before = Job(running);
  Restart();
  auto jobs = manager_->List();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id(), done);
  EXPECT_EQ(jobs[0].state(), v1::SUCCEEDED);
  EXPECT_EQ(jobs[0].history_size(), 4);
  EXPECT_EQ(jobs[1].history_size(), before.history_size());

  FakeWorkerLink again;
  Register(again, "w1", 2, {Ref(running, 0, 0), Ref(running, 0, 1)});
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
  EXPECT_EQ(Stops(again), 0);
  Exited(again, running, 0, 0, 0);
  Exited(again, running, 0, 1, 0);
  EXPECT_EQ(Job(running).state(), v1::SUCCEEDED);
}

TEST_F(JobManagerTest, CancelWhileAWorkerIsAwayStopsItsRanksWhenItReturns) {
  std::string id;
  {
    FakeWorkerLink w1, w2;
    Register(w1, "w1", 1);
    Register(w2, "w2", 1);
    id = Submit(2);
    Started(w1, id, 0, 0);
    Started(w2, id, 0, 1);
  }
  Restart();
  FakeWorkerLink w1;
  Register(w1, "w1", 1, {Ref(id, 0, 0)});
  auto workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].state(), v1::WORKER_STATE_ALIVE);
  EXPECT_EQ(workers[1].state(), v1::WORKER_STATE_DISCONNECTED) << "w2 is not back yet";

  ASSERT_TRUE(manager_->Cancel(id).ok());
  FakeWorkerLink w2;
  Register(w2, "w2", 1, {Ref(id, 0, 1)});
  EXPECT_EQ(Stops(w2), 1) << "the stop w2 missed is sent when it returns";
  EXPECT_EQ(Job(id).ranks(1).state(), v1::RANK_RUNNING)
      << "the rank still runs until w2 reports its exit";
  Exited(w2, id, 0, 1, 0, /*stopped=*/true);
  EXPECT_EQ(Job(id).ranks(1).state(), v1::RANK_STOPPED);
}

TEST_F(JobManagerTest, RanksNotFoundAfterRestartAreLost) {
  std::string id;
  {
    FakeWorkerLink w1;
    Register(w1, "w1", 1);
    id = Submit(1);
    Started(w1, id, 0, 0);
  }
  Restart();
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "the worker has time to come back";
  clock_.Advance(absl::Seconds(11));
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).history().rbegin()->reason(), v1::WORKER_LOST);
}

TEST_F(JobManagerTest, WatchSeesEveryChange) {
  FakeWorkerLink w1;
  Register(w1, "w1", 1);
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
