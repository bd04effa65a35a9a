// JobManager and worker health, on a fake clock: cordons kept across a
// coordinator restart, a drain that moves a job without counting a
// restart, failures blamed on a worker until it is quarantined, and the
// workers a job avoids after its own ranks failed there twice.
#include <csignal>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

class JobManagerHealthTest : public JobManagerTest {
 protected:
  const v1::Worker* Find(const std::vector<v1::Worker>& workers, const std::string& id) {
    for (const v1::Worker& w : workers) {
      if (w.id() == id) return &w;
    }
    return nullptr;
  }
  bool Cordoned(const std::string& id) {
    const std::vector<v1::Worker> workers = manager_->ListWorkers();
    const v1::Worker* w = Find(workers, id);
    return w != nullptr && w->health().has_cordon();
  }
  std::string WorkerOf(const std::string& job, int rank = 0) {
    return Job(job).ranks(rank).worker_id();
  }
  // The rank, started on `w`, dies by `signal`; its attempt ends.
  void Crash(TestWorker& w, const std::string& job, int signal = SIGSEGV) {
    const int attempt = Job(job).attempt();
    Started(w, job, attempt, 0);
    Killed(w, job, attempt, 0, signal);
  }
  TestWorker* ById(std::vector<TestWorker*> workers, const std::string& id) {
    for (TestWorker* w : workers) {
      if (w->id == id) return w;
    }
    return nullptr;
  }
};

// Three workers of one slot run a 3-rank job whose rank 2 computes `slow`
// times slower; every second each worker reports its rank's totals.
class StragglerTest : public JobManagerHealthTest {
 protected:
  std::string StartJob(const std::string& on_straggler, int workers = 3) {
    for (int i = 0; i < workers; ++i) {
      EXPECT_OK(Register(w_[i], "w" + std::to_string(i), 1));
    }
    v1::JobSpec spec;
    spec.set_name("train");
    spec.set_ranks(3);
    spec.set_max_restarts(0);
    spec.set_on_straggler(on_straggler);
    spec.add_command("true");
    const std::string job = Submit(spec);
    for (int r = 0; r < 3; ++r) Started(*ById(Workers(), WorkerOf(job, r)), job, 0, r);
    EXPECT_EQ(Job(job).state(), v1::RUNNING);
    return job;
  }
  std::vector<TestWorker*> Workers() { return {&w_[0], &w_[1], &w_[2], &w_[3]}; }
  void Train(const std::string& job, absl::Duration d, double slow) {
    for (absl::Duration t; t < d; t += absl::Seconds(1)) {
      clock_.Advance(absl::Seconds(1));
      ++seconds_;
      const v1::Job now = Job(job);
      if (now.state() != v1::RUNNING) return;
      for (TestWorker* w : live_) {
        v1::Heartbeat beat;
        for (const auto& [key, rank] : w->running) *beat.add_running() = rank;
        for (int r = 0; r < now.ranks_size(); ++r) {
          if (now.ranks(r).worker_id() != w->id) continue;
          v1::RankProgress* p = beat.add_progress();
          *p->mutable_rank() = Ref(job, now.attempt(), r);
          p->mutable_progress()->set_step(50 * seconds_);
          p->mutable_progress()->set_compute_steps(50 * seconds_);
          p->mutable_progress()->set_compute_seconds(0.5 * seconds_ * (r == 2 ? slow : 1.0));
        }
        manager_->OnHeartbeat(w->session, beat);
      }
      manager_->Tick();
    }
  }

  TestWorker w_[4];
  int64_t seconds_ = 0;
};

TEST_F(StragglerTest, ARankSlowForAMinuteIsNamedAndItsRatioMeasured) {
  const std::string job = StartJob("warn");
  // The first figure comes with the second report: slow from 2s on.
  Train(job, absl::Seconds(61), 1.8);
  EXPECT_EQ(Job(job).stragglers_size(), 0) << "slow for 59s";
  std::vector<RankSlowdown> slowdowns = manager_->Slowdowns();
  ASSERT_EQ(slowdowns.size(), 3u);
  EXPECT_NEAR(slowdowns[2].ratio, 1.8, 1e-6);
  EXPECT_EQ(slowdowns[2].worker_id, WorkerOf(job, 2));
  EXPECT_NEAR(slowdowns[0].ratio, 1.0, 1e-6);

  Train(job, absl::Seconds(1), 1.8);
  const v1::Job flagged = Job(job);
  ASSERT_EQ(flagged.stragglers_size(), 1);
  EXPECT_EQ(flagged.stragglers(0).rank(), 2);
  EXPECT_EQ(flagged.stragglers(0).worker_id(), WorkerOf(job, 2));
  EXPECT_NEAR(flagged.stragglers(0).ratio(), 1.8, 1e-6);
  EXPECT_EQ(flagged.state(), v1::RUNNING) << "on_straggler: warn";
  EXPECT_EQ(Last(job).reason(), v1::RANK_STRAGGLING);
  EXPECT_EQ(Last(job).state(), v1::RUNNING) << "a note, not a transition";
  EXPECT_EQ(Last(job).message(), absl::StrCat("straggler: rank 2 on ", WorkerOf(job, 2),
                                              ": compute 1.8× the job's median for 1m"));
  // Once it keeps up again, it is no longer named.
  Train(job, absl::Seconds(40), 1.0);
  EXPECT_EQ(Job(job).stragglers_size(), 0);
}

TEST_F(StragglerTest, ExcludeRestartsTheJobWithoutTheStragglersWorkerWhenOthersCanHoldIt) {
  const std::string job = StartJob("exclude", /*workers=*/4);
  const std::string slow_worker = WorkerOf(job, 2);
  Train(job, absl::Seconds(62), 2.0);
  v1::Job restarting = Job(job);
  EXPECT_EQ(restarting.state(), v1::RESTARTING);
  EXPECT_EQ(Last(job).reason(), v1::RANK_STRAGGLING);
  EXPECT_THAT(Last(job).message(), HasSubstr("restarting from a checkpoint taken on stop without "
                                             "worker " +
                                             slow_worker));
  ASSERT_EQ(restarting.excluded_workers_size(), 1);
  EXPECT_EQ(restarting.excluded_workers(0).worker_id(), slow_worker);
  EXPECT_EQ(restarting.restarts(), 0) << "not counted";
  for (int r = 0; r < 3; ++r) {
    TestWorker& w = *ById(Workers(), restarting.ranks(r).worker_id());
    Exited(w, job, 0, r, 0, /*stopped=*/true);
  }
  Pass(absl::Seconds(1));
  const v1::Job again = Job(job);
  EXPECT_EQ(again.state(), v1::STARTING);
  for (const v1::RankStatus& rank : again.ranks()) EXPECT_NE(rank.worker_id(), slow_worker);
}

TEST_F(StragglerTest, ExcludeOnlyWarnsWhenTheOthersCannotHoldTheJob) {
  const std::string job = StartJob("exclude", /*workers=*/3);
  Train(job, absl::Seconds(62), 2.0);
  EXPECT_EQ(Job(job).state(), v1::RUNNING);
  EXPECT_THAT(Last(job).message(), HasSubstr("; not excluded: without "));
  EXPECT_EQ(Job(job).excluded_workers_size(), 0);
}

TEST_F(JobManagerHealthTest, ACordonedWorkerTakesNoRanksAndStaysCordonedAcrossARestart) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 2));
  ASSERT_OK(Register(w2, "w2", 2));
  absl::StatusOr<v1::Worker> cordoned = manager_->Cordon("w2", "new NIC", "admin");
  ASSERT_OK(cordoned);
  EXPECT_EQ(cordoned->health().cordon().reason(), "new NIC");
  EXPECT_EQ(cordoned->health().cordon().by(), "admin");
  EXPECT_EQ(cordoned->health().cordon().since_unix_ms(), absl::ToUnixMillis(clock_.Now()));

  const std::string job = Submit(2);
  EXPECT_EQ(WorkerOf(job, 0), "w1");
  EXPECT_EQ(WorkerOf(job, 1), "w1");
  const std::string waiting = Submit(1);
  EXPECT_EQ(Job(waiting).state(), v1::PENDING) << "w2 is free but cordoned";

  Restart();
  TestWorker w1b, w2b;
  ASSERT_OK(Register(w1b, "w1", 2, {Running(job, 0, 0, 0), Running(job, 0, 1, 1)}));
  ASSERT_OK(Register(w2b, "w2", 2));
  Pass(absl::Seconds(1));
  EXPECT_TRUE(Cordoned("w2")) << "stored";
  EXPECT_EQ(Job(waiting).state(), v1::PENDING);

  absl::StatusOr<v1::Worker> open = manager_->Uncordon("w2");
  ASSERT_OK(open);
  EXPECT_FALSE(open->health().has_cordon());
  Pass(absl::Seconds(1));
  EXPECT_EQ(WorkerOf(waiting), "w2");

  EXPECT_THAT(manager_->Cordon("w9", "", "admin").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(manager_->Cordon("w9", "", "admin").status().message()),
              HasSubstr("no worker \"w9\""));
  EXPECT_THAT(manager_->Cordon("w1", std::string(600, 'x'), "admin").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(Cordoned("w1")) << "nothing half-done";
}

TEST_F(JobManagerHealthTest, AGpuErrorEventIsAcknowledgedAndABrokenGpuCordonsItsWorker) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
  v1::WorkerMessage m;
  m.set_seq(++w1.seq);
  m.mutable_gpu_error()->set_gpu(1);
  m.mutable_gpu_error()->set_kind(v1::GPU_ERROR_XID);
  m.mutable_gpu_error()->set_xid(79);
  EXPECT_EQ(manager_->OnRankEvent(w1.session, m), m.seq()) << "acknowledged";
  EXPECT_TRUE(Cordoned("w1"));
  const std::string job = Submit(1);
  EXPECT_EQ(Job(job).state(), v1::PENDING);
  // Sent again after a reconnect, it is applied once.
  EXPECT_EQ(manager_->OnRankEvent(w1.session, m), m.seq());
  EXPECT_EQ(Find(manager_->ListWorkers(), "w1")->health().gpu_errors_size(), 1);
}

TEST_F(JobManagerHealthTest, ADrainMovesItsJobsElsewhereWithoutCountingARestart) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  v1::JobSpec spec;
  spec.set_name("train");
  spec.set_ranks(1);
  spec.set_max_restarts(0);
  spec.add_command("true");
  const std::string job = Submit(spec);
  const std::string first = WorkerOf(job);
  TestWorker& from = first == "w1" ? w1 : w2;
  TestWorker& to = first == "w1" ? w2 : w1;
  Started(from, job, 0, 0);
  ASSERT_EQ(Job(job).state(), v1::RUNNING);
  from.link.Take();

  absl::StatusOr<v1::DrainWorkerResponse> drained =
      manager_->Drain(first, "kernel upgrade", "admin", absl::Seconds(45));
  ASSERT_OK(drained);
  EXPECT_EQ(
      std::vector<std::string>(drained->stopped_jobs().begin(), drained->stopped_jobs().end()),
      std::vector<std::string>{job});
  EXPECT_TRUE(drained->worker().health().cordon().drained());
  EXPECT_EQ(Job(job).state(), v1::RESTARTING);
  EXPECT_EQ(Last(job).reason(), v1::WORKER_DRAINED);
  EXPECT_THAT(Last(job).message(),
              HasSubstr(absl::StrCat("worker ", first, " drained by admin (kernel upgrade)")));
  std::vector<v1::StopJob> stops = StopsOf(from);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].grace_ms(), 45000);

  // The rank checkpoints on SIGTERM and exits; the job resumes on the other
  // worker, its restarts untouched though max_restarts is 0.
  Exited(from, job, 0, 0, 0, /*stopped=*/true);
  Pass(absl::Seconds(1));
  const v1::Job moved = Job(job);
  EXPECT_EQ(moved.state(), v1::STARTING);
  EXPECT_EQ(moved.restarts(), 0);
  EXPECT_EQ(moved.attempt(), 1);
  EXPECT_EQ(WorkerOf(job), to.id);
  EXPECT_TRUE(Cordoned(first));
}

TEST_F(JobManagerHealthTest,
       FailuresOfTwoJobsQuarantineTheirWorkerAndAJobAvoidsWhereItFailedTwice) {
  options_.health.max_quarantined.count = 1;
  options_.backoff.base = absl::Seconds(1);
  Restart();
  TestWorker w1, w2, w3;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  ASSERT_OK(Register(w3, "w3", 1));
  std::vector<TestWorker*> all = {&w1, &w2, &w3};

  // Job a fails twice on the same worker: it avoids it from then on.
  const std::string a = Submit(1, /*max_restarts=*/5);
  const std::string bad = WorkerOf(a);
  Crash(*ById(all, bad), a);
  Pass(absl::Seconds(5));
  ASSERT_EQ(WorkerOf(a), bad) << "placement picks the same free worker again";
  Crash(*ById(all, bad), a);
  v1::Job avoiding = Job(a);
  ASSERT_EQ(avoiding.excluded_workers_size(), 1);
  EXPECT_EQ(avoiding.excluded_workers(0).worker_id(), bad);
  EXPECT_THAT(avoiding.excluded_workers(0).reason(),
              HasSubstr("2 failures of its ranks there; the last: rank 0 was killed by signal 11"));
  EXPECT_EQ(avoiding.worker_failures().at(bad), 2);
  EXPECT_FALSE(Cordoned(bad)) << "one job's failures quarantine no worker";
  Pass(absl::Seconds(5));
  ASSERT_EQ(Job(a).state(), v1::STARTING);
  EXPECT_NE(WorkerOf(a), bad);

  // A second job fails there: the worker is quarantined.
  const std::string b = Submit(1, /*max_restarts=*/5);
  ASSERT_EQ(WorkerOf(b), bad);
  Crash(*ById(all, bad), b);
  EXPECT_TRUE(Cordoned(bad));
  const std::vector<v1::Worker> workers = manager_->ListWorkers();
  const v1::Cordon& cordon = Find(workers, bad)->health().cordon();
  EXPECT_EQ(cordon.by(), "ringmaster");
  EXPECT_THAT(cordon.reason(), HasSubstr("quarantined: failures of 2 jobs within 10m"));
  EXPECT_THAT(cordon.reason(), HasSubstr(a));
  EXPECT_THAT(cordon.reason(), HasSubstr(b));
  Pass(absl::Seconds(5));
  EXPECT_EQ(Job(b).state(), v1::STARTING);
  EXPECT_NE(WorkerOf(b), bad) << "quarantined";

  // An hour on, it is released on probation.
  for (const std::string& job : {a, b}) {
    TestWorker& w = *ById(all, WorkerOf(job));
    Started(w, job, Job(job).attempt(), 0);
    Exited(w, job, Job(job).attempt(), 0, 0);
  }
  Pass(absl::Hours(1));
  EXPECT_FALSE(Cordoned(bad));
  EXPECT_GT(Find(manager_->ListWorkers(), bad)->health().probation_until_unix_ms(),
            absl::ToUnixMillis(clock_.Now()));
}

TEST_F(JobManagerHealthTest, AJobAvoidsAWorkerOnlyWhileOthersCanHoldIt) {
  options_.backoff.base = absl::Seconds(1);
  Restart();
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  const std::string job = Submit(2, /*max_restarts=*/5);
  for (int failure = 0; failure < 2; ++failure) {
    const int attempt = Job(job).attempt();
    Started(w1, job, attempt, 0);
    Started(w2, job, attempt, 1);
    Killed(w2, job, attempt, 1, SIGBUS);
    Exited(w1, job, attempt, 0, 1, /*stopped=*/true);
    Pass(absl::Seconds(5));
  }
  const v1::Job placed = Job(job);
  ASSERT_EQ(placed.excluded_workers_size(), 1);
  EXPECT_EQ(placed.excluded_workers(0).worker_id(), "w2");
  EXPECT_EQ(placed.state(), v1::STARTING) << "w1 alone cannot hold it: w2 is used after all";
}

TEST_F(JobManagerHealthTest, AJobThatFailsOnEveryWorkerSaysItIsAtFault) {
  options_.health.max_quarantined.count = 1;
  options_.backoff.base = absl::Seconds(1);
  Restart();
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  std::vector<TestWorker*> all = {&w1, &w2};
  const std::string job = Submit(1, /*max_restarts=*/5);
  std::set<std::string> failed_on;
  for (int attempt = 0; attempt < 6 && failed_on.size() < 2; ++attempt) {
    const std::string on = WorkerOf(job);
    failed_on.insert(on);
    Crash(*ById(all, on), job);
    Pass(absl::Seconds(5));
  }
  EXPECT_THAT(Job(job).root_cause().message(),
              HasSubstr("it failed on 2 different workers (w1, w2)"));
  EXPECT_FALSE(Cordoned("w1"));
  EXPECT_FALSE(Cordoned("w2"));
}

}  // namespace
}  // namespace ringmaster
