// JobManager: what a spec asks beyond its ranks: restart_policy and
// never_retry_exit_codes, deadline_s, worker_selector, ranks_per_worker and
// the CPUs and memory of resources, against what workers register; labels
// as ListJobs filters; SubmitJob's request_id; WatchAll and its resume
// tokens.
#include "coordinator/jobs/job_manager_fixture.h"
#include "domain/job_state.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

TEST_F(JobManagerTest, RestartPolicyNeverEndsTheJobAtItsFirstFailure) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  v1::JobSpec spec = CommandSpec(1);
  spec.set_max_restarts(3);
  spec.set_restart_policy("never");
  const std::string id = Submit(spec);
  Started(w1, id, 0, 0);
  Killed(w1, id, 0, 0, 9);
  EXPECT_EQ(Job(id).state(), v1::FAILED) << "3 restarts left, but the policy says never";
  EXPECT_EQ(Last(id).message(),
            "rank 0 was killed by signal 9: not restarting (restart_policy: never)");
  EXPECT_EQ(Job(id).restarts(), 0);
}

TEST_F(JobManagerTest, NeverRetryExitCodeEndsTheJobEvenWhenAPeerIsTheCause) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  v1::JobSpec spec = CommandSpec(2);
  spec.set_max_restarts(3);
  spec.add_never_retry_exit_codes(2);
  const std::string id = Submit(spec);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Exited(w1, id, 0, 0, 2);  // rank 0 refuses its arguments
  Killed(w2, id, 0, 1, 9);  // rank 1 is killed; a signal outranks an exit as the cause
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::RANK_SIGNALED);
  EXPECT_EQ(Last(id).message(),
            "rank 1 was killed by signal 9: not restarting (rank 0 exited with code 2, one of "
            "never_retry_exit_codes)");

  // Any other code restarts as before.
  const std::string other = Submit(spec);
  Started(w1, other, 0, 0);
  Started(w2, other, 0, 1);
  Exited(w1, other, 0, 0, 3);
  Exited(w2, other, 0, 1, 3);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(other).state(), v1::RESTARTING);
}

TEST_F(JobManagerTest, ARankThatWouldNotStartAtARestartEndsItsJobWithoutOne) {
  // Its image does not exist: the worker says so, and that a restart would
  // meet the same.
  TestWorker w1, w2;
  w1.labels = w2.labels = {{"ringmaster.dev/images", "true"}};
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  v1::JobSpec spec = CommandSpec(2);
  spec.set_max_restarts(3);
  spec.set_image("registry.example:5000/team/train:9.9");
  const std::string id = Submit(spec);
  Started(w2, id, 0, 1);
  auto cannot_start = [&](bool never_retry) {
    v1::WorkerMessage m = ExitedEvent(w1, id, Job(id).attempt(), 0, 0);
    m.mutable_rank_exited()->set_start_failed(true);
    m.mutable_rank_exited()->set_never_retry(never_retry);
    m.mutable_rank_exited()->set_message(
        "pulling registry.example:5000/team/train:9.9: reading manifest 9.9 in "
        "registry.example:5000/team/train: manifest unknown: manifest unknown");
    Deliver(w1, m);
  };
  cannot_start(true);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).restarts(), 0);
  EXPECT_EQ(Last(id).reason(), v1::RANK_START_FAILED);
  EXPECT_EQ(Last(id).message(),
            "rank 0 could not start: pulling registry.example:5000/team/train:9.9: reading "
            "manifest 9.9 in registry.example:5000/team/train: manifest unknown: manifest "
            "unknown: not restarting (rank 0 would not start at a restart either)");

  Exited(w2, id, 0, 1, 0, /*stopped=*/true);  // its slot is free again

  // A start that may succeed later (an unreachable registry) restarts.
  const std::string other = Submit(spec);
  Started(w2, other, 0, 1);
  v1::WorkerMessage m = ExitedEvent(w1, other, 0, 0, 0);
  m.mutable_rank_exited()->set_start_failed(true);
  m.mutable_rank_exited()->set_message("pulling ...: connection refused");
  Deliver(w1, m);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(other).state(), v1::RESTARTING);
}

TEST_F(JobManagerTest, DeadlineCountsFromTheFirstStartThroughRestarts) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  // Queued behind a job that holds the only slot: a deadline does not run
  // while a job has never started.
  const std::string blocker = Submit(1);
  Started(w1, blocker, 0, 0);
  v1::JobSpec spec = CommandSpec(1);
  spec.set_deadline_s(60);
  spec.set_max_restarts(10);
  const std::string id = Submit(spec);
  Pass(absl::Seconds(100));
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  Exited(w1, blocker, 0, 0, 0);
  Pass(absl::Seconds(1));
  ASSERT_EQ(Job(id).state(), v1::STARTING);
  w1.link.Take();

  // 40 s into the first attempt it fails, restarts, and runs again.
  Started(w1, id, 0, 0);
  Pass(absl::Seconds(40));
  Exited(w1, id, 0, 0, 1);
  Pass(absl::Seconds(5));
  Started(w1, id, 1, 0);
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  ASSERT_EQ(Job(id).attempt(), 1);
  Pass(absl::Seconds(14));
  EXPECT_EQ(Job(id).state(), v1::RUNNING) << "59 s since its first start";
  w1.link.Take();
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::DEADLINE_EXCEEDED);
  EXPECT_EQ(Last(id).message(),
            "RUNNING at its deadline: 60s since its ranks first started "
            "(deadline_s)");
  EXPECT_EQ(Stops(w1), 1) << "its rank is told to stop";
}

TEST_F(JobManagerTest, DeadlineEndsAJobWaitingBetweenAttempts) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  v1::JobSpec spec = CommandSpec(1);
  spec.set_deadline_s(10);
  spec.set_max_restarts(10);
  const std::string id = Submit(spec);
  Started(w1, id, 0, 0);
  Exited(w1, id, 0, 0, 1);
  Pass(absl::Seconds(1));
  Silence(w1);  // no worker to start the next attempt on
  Pass(absl::Seconds(8));
  const v1::JobState waiting = Job(id).state();
  EXPECT_TRUE(waiting == v1::RESTARTING || waiting == v1::PENDING) << StateName(waiting);
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).reason(), v1::DEADLINE_EXCEEDED);
}

TEST_F(JobManagerTest, DeadlineEndsAJobPendingForItsNextAttempt) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  v1::JobSpec spec = CommandSpec(1);
  spec.set_deadline_s(10);
  spec.set_max_restarts(10);
  const std::string id = Submit(spec);
  const std::string blocker = Submit(1);  // waits for the slot
  Started(w1, id, 0, 0);
  Exited(w1, id, 0, 0, 1);  // the blocker takes the slot it frees
  Pass(absl::Seconds(5));
  ASSERT_EQ(Job(blocker).state(), v1::STARTING);
  EXPECT_EQ(Job(id).state(), v1::PENDING) << "back-off over, no slot for its next attempt";
  Pass(absl::Seconds(5));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Last(id).message(),
            "PENDING at its deadline: 10s since its ranks first started (deadline_s)");
}

TEST_F(JobManagerTest, AJobInAnImageGoesOnlyToWorkersThatRunImages) {
  TestWorker host_only, runs_images;
  runs_images.labels = {{"ringmaster.dev/images", "true"}};
  ASSERT_OK(Register(host_only, "w1", 2));
  v1::JobSpec spec = CommandSpec(2);
  spec.set_image("registry.example:5000/team/train:1.2");
  const std::string id = Submit(spec);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Job(id).pending_reason(),
            "needs 2 ranks of 1 slot each, on workers with ringmaster.dev/images=true, more "
            "than all alive workers can hold (waiting for workers to join)");
  ASSERT_OK(Register(runs_images, "w2", 2));
  Pass(absl::Seconds(1));
  const v1::Job placed = Job(id);
  ASSERT_EQ(placed.state(), v1::STARTING);
  for (const v1::RankStatus& rank : placed.ranks()) EXPECT_EQ(rank.worker_id(), "w2");
  std::vector<v1::StartRank> starts = Starts(runs_images);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].image(), "registry.example:5000/team/train:1.2");
  EXPECT_EQ(starts[0].image_pull(), "if_not_present");
}

TEST_F(JobManagerTest, AnImagesPullIsShownAndHoldsOffTheStartTimeout) {
  TestWorker w;
  const std::string id = SubmitInImage(&w);
  ASSERT_EQ(Job(id).state(), v1::STARTING);
  auto pulled = [&](int64_t done) { ReportPull(w, id, done, int64_t{1288} << 20); };
  // A pull of 4 minutes, reported every 30 s, outlasts the 60 s timeout.
  for (int i = 1; i <= 8; ++i) {
    Pass(absl::Seconds(30));
    pulled(int64_t{42} * i << 20);
    ASSERT_EQ(Job(id).state(), v1::STARTING) << "after " << 30 * i << " s";
  }
  EXPECT_EQ(Job(id).pulling(),
            "pulling registry.example:5000/team/train:1.2: 336.0 MiB of 1.3 GiB");
  // Its goodput counts the pull as start-up, not as a restart.
  const v1::Goodput goodput = Job(id).goodput();
  EXPECT_EQ(goodput.phase(), v1::Goodput::STARTUP);
  EXPECT_DOUBLE_EQ(goodput.lost_seconds().at("startup"), 240);
  EXPECT_EQ(goodput.lost_seconds().count("restart"), 0u);
  // The pull over, the rank has the timeout to start.
  Pass(absl::Seconds(59));
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  Pass(absl::Seconds(2));
  EXPECT_NE(Job(id).state(), v1::STARTING);
  EXPECT_EQ(Job(id).pulling(), "") << "said only while starting";
}

TEST_F(JobManagerTest, APullThatStandsStillMeetsTheStartTimeout) {
  TestWorker w;
  const std::string id = SubmitInImage(&w);
  auto pulled = [&](int64_t done) { ReportPull(w, id, done, 0); };
  Pass(absl::Seconds(30));
  pulled(int64_t{42} << 20);
  // Still pulling, never a byte more: the 60 s run from the last byte.
  for (int i = 0; i < 5; ++i) {
    Pass(absl::Seconds(10));
    pulled(int64_t{42} << 20);
  }
  Pass(absl::Seconds(9));
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  Pass(absl::Seconds(2));
  EXPECT_NE(Job(id).state(), v1::STARTING);
}

TEST_F(JobManagerTest, SelectorAndResourcesChooseTheWorkersAndReachTheRanks) {
  TestWorker a, b;
  a.labels = {{"zone", "a"}};
  a.cpus = 16;
  b.labels = {{"zone", "b"}};
  b.cpus = 4;
  b.memory_mb = 8192;
  ASSERT_OK(Register(a, "wa", 4));
  ASSERT_OK(Register(b, "wb", 4));
  v1::JobSpec spec = CommandSpec(2);
  (*spec.mutable_worker_selector())["zone"] = "b";
  spec.mutable_resources()->set_cpus(2);
  spec.mutable_resources()->set_memory_mb(1024);
  const std::string id = Submit(spec);
  const v1::Job job = Job(id);
  ASSERT_EQ(job.state(), v1::STARTING);
  for (const v1::RankStatus& rank : job.ranks()) EXPECT_EQ(rank.worker_id(), "wb");
  std::vector<v1::StartRank> starts = Starts(b);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].cpus(), 2);
  EXPECT_EQ(starts[0].memory_bytes(), int64_t{1024} << 20);

  // wb has 2 free slots but no CPUs left; wa has both but not the label.
  const std::string next = Submit(spec);
  EXPECT_EQ(Job(next).state(), v1::PENDING);
  EXPECT_EQ(Job(next).pending_reason(),
            "needs 2 ranks of 1 slot, 2 CPUs and 1024 MB each, on workers with zone=b; room "
            "for 0 on the 1 matching of 2 alive workers");
  std::vector<v1::Worker> workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[1].labels().at("zone"), "b");
  EXPECT_EQ(workers[1].cpus(), 4);
  EXPECT_EQ(workers[1].memory_mb(), 8192);
}

TEST_F(JobManagerTest, RanksPerWorkerSpreadsTheRanks) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 4));
  ASSERT_OK(Register(w2, "w2", 4));
  v1::JobSpec spec = CommandSpec(4);
  spec.set_ranks_per_worker(2);
  const std::string id = Submit(spec);
  const v1::Job job = Job(id);
  ASSERT_EQ(job.state(), v1::STARTING);
  std::vector<std::string> placed;
  for (const v1::RankStatus& rank : job.ranks()) placed.push_back(rank.worker_id());
  EXPECT_EQ(placed, (std::vector<std::string>{"w1", "w1", "w2", "w2"}))
      << "without ranks_per_worker all four would share w1";
}

TEST_F(JobManagerTest, LabelsFilterTheListOfLiveAndEndedJobs) {
  auto labelled = [&](std::map<std::string, std::string> labels) {
    v1::JobSpec spec = CommandSpec(1);
    *spec.mutable_labels() = {labels.begin(), labels.end()};
    return Submit(spec);
  };
  const std::string a_prod = labelled({{"team", "a"}, {"env", "prod"}});
  const std::string a_dev = labelled({{"team", "a"}, {"env", "dev"}});
  const std::string b_prod = labelled({{"team", "b"}, {"env", "prod"}});
  const std::string none = labelled({});
  ASSERT_OK(manager_->Cancel(a_prod));
  manager_->Tick();  // a_prod is retired: read from the store

  JobQuery team_a;
  team_a.labels = {{"team", "a"}};
  EXPECT_EQ(Ids(Page(team_a)), (std::vector<std::string>{a_dev, a_prod}));
  JobQuery prod;
  prod.labels = {{"env", "prod"}};
  EXPECT_EQ(Ids(Page(prod)), (std::vector<std::string>{b_prod, a_prod}));
  JobQuery both;
  both.labels = {{"team", "a"}, {"env", "prod"}};
  EXPECT_EQ(Ids(Page(both)), (std::vector<std::string>{a_prod}));
  JobQuery other;
  other.labels = {{"team", "c"}};
  EXPECT_TRUE(Page(other).jobs.empty());
  EXPECT_EQ(Ids(Page(JobQuery{})).size(), 4u) << none << " has no labels and is listed";
}

TEST_F(JobManagerTest, RequestIdMakesASubmissionSafeToRetryAcrossARestart) {
  const v1::JobSpec spec = CommandSpec(1);
  absl::StatusOr<std::string> first = manager_->Submit(spec, "3f2a-retry-1");
  ASSERT_OK(first) << first.status();
  EXPECT_EQ(manager_->Submit(spec, "3f2a-retry-1").value_or(""), *first);
  EXPECT_NE(manager_->Submit(spec, "another").value_or(*first), *first);
  EXPECT_NE(manager_->Submit(spec).value_or(*first), *first) << "no request id: a new job";

  Restart();
  EXPECT_EQ(manager_->Submit(spec, "3f2a-retry-1").value_or(""), *first);
  v1::JobSpec changed = spec;
  changed.set_ranks(2);
  absl::Status conflict = manager_->Submit(changed, "3f2a-retry-1").status();
  EXPECT_THAT(conflict, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(conflict.message(),
            absl::StrCat("request_id \"3f2a-retry-1\" was used for job ", *first,
                         " with another spec; use a new request_id for a new job"));
  EXPECT_THAT(manager_->Submit(spec, "has space").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(manager_->Submit(spec, std::string(129, 'x')).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));

  // Ended and retired, it still answers; deleted, the id is free again.
  ASSERT_OK(manager_->Cancel(*first));
  manager_->Tick();
  EXPECT_EQ(manager_->Submit(spec, "3f2a-retry-1").value_or(""), *first);
  ASSERT_OK(manager_->Delete(*first));
  absl::StatusOr<std::string> again = manager_->Submit(spec, "3f2a-retry-1");
  ASSERT_OK(again) << again.status();
  EXPECT_NE(*again, *first);
}

TEST_F(JobManagerTest, WatchAllListsThenFollowsEveryJobAndResumesFromAToken) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string a = Submit(1);  // STARTING on w1
  const std::string b = Submit(1);  // PENDING behind it
  std::vector<v1::Job> seen;
  absl::StatusOr<int64_t> watch =
      manager_->WatchAll("", [&](const v1::Job& job) { seen.push_back(job); });
  ASSERT_OK(watch) << watch.status();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].id(), a);
  EXPECT_EQ(seen[1].id(), b);
  EXPECT_LT(seen[0].revision(), seen[1].revision()) << "oldest change first";
  Started(w1, a, 0, 0);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].state(), v1::RUNNING);
  const std::string token = manager_->ResumeToken(seen[2]);
  manager_->Unwatch(*watch);

  // Away: a succeeds (and is retired from memory), b starts.
  Exited(w1, a, 0, 0, 0);
  manager_->Tick();
  std::vector<v1::Job> resumed;
  watch = manager_->WatchAll(token, [&](const v1::Job& job) { resumed.push_back(job); });
  ASSERT_OK(watch) << watch.status();
  ASSERT_EQ(resumed.size(), 2u) << "each changed job once, as it is now";
  EXPECT_EQ(resumed[0].id(), a);
  EXPECT_EQ(resumed[0].state(), v1::SUCCEEDED);
  EXPECT_EQ(resumed[1].id(), b);
  EXPECT_EQ(resumed[1].state(), v1::STARTING);
  EXPECT_GT(resumed[0].revision(), seen[2].revision());
  EXPECT_GT(resumed[1].revision(), resumed[0].revision());
  Started(w1, b, 0, 0);
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed[2].state(), v1::RUNNING);
  manager_->Unwatch(*watch);

  EXPECT_THAT(manager_->WatchAll("nonsense", [](const v1::Job&) {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A token of the run before a restart still resumes: each job changed
  // since, as stored.
  Restart();
  std::vector<v1::Job> after_restart;
  watch = manager_->WatchAll(token, [&](const v1::Job& job) { after_restart.push_back(job); });
  ASSERT_OK(watch) << watch.status();
  ASSERT_EQ(after_restart.size(), 2u);
  EXPECT_EQ(after_restart[0].id(), a);
  EXPECT_EQ(after_restart[0].state(), v1::SUCCEEDED) << "retired, from the store";
  EXPECT_EQ(after_restart[1].id(), b);
  EXPECT_EQ(after_restart[1].state(), v1::RUNNING);
  manager_->Unwatch(*watch);
  absl::Status never = manager_->WatchAll("x.999999999999999", [](const v1::Job&) {}).status();
  EXPECT_THAT(never, StatusIs(absl::StatusCode::kOutOfRange)) << never;
}

// Revisions stay comparable across a restart: a job keeps the revision it
// was stored with, and the next run numbers its changes above every
// revision given before, even a progress update's that was never stored.
TEST_F(JobManagerTest, RevisionsGrowAcrossARestartAndAResumeTokenCoversTheJobsLoaded) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string a = Submit(1);
  const std::string b = Submit(1);  // PENDING behind a
  Started(w1, a, 0, 0);
  v1::Heartbeat beat;
  v1::RankProgress* progress = beat.add_progress();
  *progress->mutable_rank() = Ref(a, 0, 0);
  progress->mutable_progress()->set_step(7);
  manager_->OnHeartbeat(w1.session, beat);
  const absl::StatusOr<v1::Job> reported = manager_->Get(a);
  ASSERT_OK(reported);
  ASSERT_EQ(reported->progress().step(), 7);
  const int64_t b_before = manager_->Get(b)->revision();

  Restart();
  std::vector<v1::Job> listed;
  absl::StatusOr<int64_t> watch =
      manager_->WatchAll("", [&](const v1::Job& job) { listed.push_back(job); });
  ASSERT_OK(watch) << watch.status();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id(), b) << "b changed last before a started";
  EXPECT_LE(listed[0].revision(), b_before)
      << "b as stored: at most what watchers saw of it (its pending reason is only sent)";
  EXPECT_EQ(listed[1].id(), a);
  EXPECT_LT(listed[1].revision(), reported->revision())
      << "a as stored, without the progress only sent to watchers";
  manager_->Unwatch(*watch);

  ASSERT_OK(manager_->Cancel(b));
  const int64_t b_after = manager_->Get(b)->revision();
  EXPECT_GT(b_after, reported->revision()) << "above the last run's unstored progress";

  // A token this run gave with a job it loaded resumes after that job:
  // the jobs loaded after it, then this run's changes.
  std::vector<v1::Job> resumed;
  watch = manager_->WatchAll(manager_->ResumeToken(listed[0]),
                             [&](const v1::Job& job) { resumed.push_back(job); });
  ASSERT_OK(watch) << watch.status();
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0].id(), a);
  EXPECT_EQ(resumed[0].revision(), listed[1].revision());
  EXPECT_EQ(resumed[1].id(), b);
  EXPECT_EQ(resumed[1].state(), v1::CANCELLED);
  EXPECT_EQ(resumed[1].revision(), b_after);
  manager_->Unwatch(*watch);
}

// A token older than the change log holds is answered from the jobs'
// records: each job changed since, once, as it is now.
TEST_F(JobManagerTest, ATokenOlderThanTheChangeLogStillResumes) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
  const std::string a = Submit(1);
  const std::string b = Submit(1);
  Started(w1, a, 0, 0);
  Started(w1, b, 0, 0);
  const std::string token = manager_->ResumeToken(*manager_->Get(b));
  for (int step = 1; step <= 20001; ++step) {  // more than the 20000 changes the log keeps
    v1::Heartbeat beat;
    v1::RankProgress* progress = beat.add_progress();
    *progress->mutable_rank() = Ref(a, 0, 0);
    progress->mutable_progress()->set_step(step);
    manager_->OnHeartbeat(w1.session, beat);
  }
  std::vector<v1::Job> resumed;
  absl::StatusOr<int64_t> watch =
      manager_->WatchAll(token, [&](const v1::Job& job) { resumed.push_back(job); });
  ASSERT_OK(watch) << watch.status();
  ASSERT_EQ(resumed.size(), 1u) << "b has not changed since its token";
  EXPECT_EQ(resumed[0].id(), a);
  EXPECT_EQ(resumed[0].progress().step(), 20001);
  manager_->Unwatch(*watch);
}

TEST_F(JobManagerTest, ARanksErrorFileIsTheRootCauseOverItsPeersPlainExits) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  ASSERT_OK(Register(w2, "w2", 1));
  v1::JobSpec spec = CommandSpec(2);
  spec.set_max_restarts(0);
  const std::string id = Submit(spec);
  Started(w1, id, 0, 0);
  Started(w2, id, 0, 1);
  Exited(w1, id, 0, 0, 1);  // rank 0 loses its peer first, and says nothing
  v1::WorkerMessage raised = ExitedEvent(w2, id, 0, 1, 1);
  raised.mutable_rank_exited()->set_error("ValueError: bad input");
  Deliver(w2, raised);
  Pass(absl::Seconds(1));
  const v1::Job job = Job(id);
  ASSERT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(Last(id).message(), "rank 1 exited with code 1: ValueError: bad input");
  ASSERT_TRUE(job.has_root_cause());
  EXPECT_EQ(job.root_cause().rank(), 1);
  EXPECT_EQ(job.root_cause().worker_id(), "w2");
  EXPECT_EQ(job.root_cause().error(), "ValueError: bad input");
  EXPECT_EQ(job.root_cause().exit_code(), 1);
  EXPECT_EQ(job.root_cause().reason(), v1::RANK_EXITED);
}

}  // namespace
}  // namespace ringmaster
