// JobManager: a job's way from submission to its end, cancellation, and
// the coordinator's own restart.
#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

TEST_F(JobManagerTest, JobRunsToSuccess) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
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
  EXPECT_EQ(reasons, (std::vector<v1::Reason>{v1::SUBMITTED, v1::SCHEDULED, v1::RANKS_RUNNING,
                                              v1::RANKS_SUCCEEDED}));
  EXPECT_EQ(w1.acked, 4) << "every rank event acknowledged";
}

// A rank sees exactly its GPUs; a CPU rank placed on a GPU worker sees none.
TEST_F(JobManagerTest, RanksAreGivenExactlyTheirGpus) {
  TestWorker w1;
  w1.gpus = {4, 6, 7};  // the worker offers three of its machine's GPUs
  ASSERT_OK(Register(w1, "w1", 3));
  w1.link.Take();
  const std::string cpu = Submit(1);
  v1::JobSpec spec;
  spec.set_name("gpu");
  spec.set_ranks(1);
  spec.set_gpus_per_rank(2);
  spec.add_command("true");
  const std::string gpu = Submit(spec);
  std::vector<v1::StartRank> starts = Starts(w1);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].rank().job_id(), cpu);
  EXPECT_TRUE(starts[0].gpus().empty());
  EXPECT_EQ(starts[0].env().at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(starts[1].rank().job_id(), gpu);
  EXPECT_EQ(std::vector<int>(starts[1].gpus().begin(), starts[1].gpus().end()),
            (std::vector<int>{6, 7}));
  EXPECT_EQ(starts[1].env().at("CUDA_VISIBLE_DEVICES"), "6,7");
  spec.set_gpus_per_rank(1);
  const std::string third = Submit(spec);
  EXPECT_TRUE(Starts(w1).empty()) << "GPUs 6 and 7 are " << gpu << "'s, GPU 4's slot " << cpu
                                  << "'s";
  EXPECT_EQ(Job(third).state(), v1::PENDING);
}

TEST_F(JobManagerTest, WaitsForSlotsWithAReason) {
  TestWorker w1, w2;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(2);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_EQ(job.pending_reason(), "needs 2 slots; the cluster has 1 (waiting for workers to join)");
  EXPECT_TRUE(Starts(w1).empty());
  ASSERT_OK(Register(w2, "w2", 1));
  manager_->Tick();
  EXPECT_EQ(Job(id).state(), v1::STARTING);
  EXPECT_EQ(Starts(w1).size(), 1u);
  EXPECT_EQ(Starts(w2).size(), 1u);
}

TEST_F(JobManagerTest, RestartsWithBackoffThenFails) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
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

TEST_F(JobManagerTest, CancelStopsRanks) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 2));
  const std::string id = Submit(2);
  Started(w1, id, 0, 0);
  w1.link.Take();
  auto job = manager_->Cancel(id);
  ASSERT_OK(job);
  EXPECT_EQ(job->state(), v1::CANCELLED);
  EXPECT_EQ(Stops(w1), 1);
  EXPECT_THAT(manager_->Cancel(id).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(manager_->Cancel("nope").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerTest, BadSpecStoresNothing) {
  v1::JobSpec spec;
  spec.set_name("x");
  spec.set_ranks(0);
  spec.add_command("true");
  EXPECT_THAT(manager_->Submit(spec).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(AllJobs().empty());
  Restart();
  EXPECT_TRUE(AllJobs().empty());
}

TEST_F(JobManagerTest, RestartKeepsJobsAndReattachesRunningRanks) {
  const std::string done = [&] {
    TestWorker w1;
    EXPECT_OK(Register(w1, "w1", 2));
    std::string id = Submit(1);
    Started(w1, id, 0, 0);
    Exited(w1, id, 0, 0, 0);
    Disconnect(w1);
    return id;
  }();
  std::string running;
  {
    TestWorker w1;
    ASSERT_OK(Register(w1, "w1", 2));
    running = Submit(2);
    Started(w1, running, 0, 0);
    Started(w1, running, 0, 1);
    Disconnect(w1);
  }
  const v1::Job before = Job(running);
  Restart();
  auto jobs = AllJobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id(), done);
  EXPECT_EQ(jobs[0].state(), v1::SUCCEEDED);
  EXPECT_EQ(jobs[0].history_size(), 4);
  EXPECT_EQ(jobs[1].history_size(), before.history_size());

  TestWorker again;
  ASSERT_OK(Register(again, "w1", 2, {Running(running, 0, 0, 0), Running(running, 0, 1, 1)}));
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
    ASSERT_OK(Register(w1, "w1", 1));
    ASSERT_OK(Register(w2, "w2", 1));
    id = Submit(2);
    Started(w1, id, 0, 0);
    Started(w2, id, 0, 1);
  }
  Restart();
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1, {Running(id, 0, 0)}));
  auto workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].state(), v1::WORKER_STATE_ALIVE);
  EXPECT_EQ(workers[1].state(), v1::WORKER_STATE_SUSPECT) << "w2 is not back yet";

  ASSERT_OK(manager_->Cancel(id));
  TestWorker w2;
  ASSERT_OK(Register(w2, "w2", 1, {Running(id, 0, 1)}));
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
    ASSERT_OK(Register(w1, "w1", 1));
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
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1);
  std::vector<v1::JobState> seen;
  auto watch = manager_->Watch(id, [&](const v1::Job& j) { seen.push_back(j.state()); });
  ASSERT_OK(watch);
  Started(w1, id, 0, 0);
  Exited(w1, id, 0, 0, 0);
  manager_->Unwatch(*watch);
  EXPECT_EQ(seen.front(), v1::STARTING);
  EXPECT_EQ(seen.back(), v1::SUCCEEDED);
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// Newest first, a page at a time, each page going on where the last ended,
// whatever was submitted meanwhile; filters by state and name prefix.
TEST_F(JobManagerTest, ListsPagesNewestFirstWithFilters) {
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    v1::JobSpec spec;
    spec.set_name(i % 2 == 0 ? "even" : "odd");
    spec.set_ranks(1);
    spec.add_command("true");
    ids.push_back(Submit(spec));
  }
  ASSERT_OK(manager_->Cancel(ids[5]));
  JobQuery query;
  query.page_size = 3;
  JobPage first = Page(query);
  EXPECT_EQ(Ids(first), (std::vector<std::string>{ids[6], ids[5], ids[4]}));
  ASSERT_GT(first.next_before_number, 0);
  Submit(1);  // a newer job does not shift the pages after the first
  query.before_number = first.next_before_number;
  JobPage second = Page(query);
  EXPECT_EQ(Ids(second), (std::vector<std::string>{ids[3], ids[2], ids[1]}));
  query.before_number = second.next_before_number;
  JobPage last = Page(query);
  EXPECT_EQ(Ids(last), (std::vector<std::string>{ids[0]}));
  EXPECT_EQ(last.next_before_number, 0) << "no page after the last";

  JobQuery odd;
  odd.name_prefix = "od";
  EXPECT_EQ(Ids(Page(odd)), (std::vector<std::string>{ids[5], ids[3], ids[1]}));
  JobQuery cancelled;
  cancelled.states = {v1::CANCELLED};
  EXPECT_EQ(Ids(Page(cancelled)), (std::vector<std::string>{ids[5]}));
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

TEST_F(JobManagerTest, DeleteForgetsAnEndedJobOnlyAndForGood) {
  const std::string active = Submit(1);  // no worker: stays PENDING
  absl::Status refused = manager_->Delete(active);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(refused.message(),
            absl::StrCat("job ", active, " is PENDING; cancel it before deleting it"));
  ASSERT_OK(manager_->Cancel(active));
  ASSERT_OK(manager_->Delete(active));
  EXPECT_THAT(manager_->Get(active).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(manager_->Delete(active), StatusIs(absl::StatusCode::kNotFound));
  Restart();
  EXPECT_THAT(manager_->Get(active).status(), StatusIs(absl::StatusCode::kNotFound))
      << "deleted from the store, not only from memory";
}

TEST_F(JobManagerTest, EndedJobsArePrunedByAgeAndByCount) {
  options_.retain_finished = absl::Hours(24);
  options_.retain_finished_jobs = 2;
  Restart();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(Submit(1));
    ASSERT_OK(manager_->Cancel(ids.back()));
    clock_.Advance(absl::Minutes(1));
  }
  const std::string pending = Submit(1);
  manager_->Tick();
  // Four ended, two kept: the two oldest go.
  EXPECT_THAT(manager_->Get(ids[0]).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(manager_->Get(ids[1]).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_OK(manager_->Get(ids[2]));
  EXPECT_OK(manager_->Get(ids[3]));
  // ids[2] ended 2 minutes after the first, ids[3] 3: a day and 30 s after
  // ids[2] ended, only it is past the age.
  clock_.Advance(absl::Hours(24) - absl::Minutes(2) + absl::Seconds(30));
  manager_->Tick();
  EXPECT_THAT(manager_->Get(ids[2]).status(), StatusIs(absl::StatusCode::kNotFound))
      << "ended a day ago";
  EXPECT_OK(manager_->Get(ids[3])) << "ended a minute later";
  EXPECT_OK(manager_->Get(pending)) << "an active job is never pruned";
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// Big jobs make short pages, never a message past the page's byte bound.
TEST_F(JobManagerTest, PagesEndBeforeTheirByteBound) {
  for (int i = 0; i < 30; ++i) {
    v1::JobSpec spec;
    spec.set_name("big");
    spec.set_ranks(1);
    spec.add_command("true");
    (*spec.mutable_env())["BLOB"] = std::string(100000, 'x');
    Submit(spec);
  }
  JobQuery query;
  query.page_size = 500;
  query.max_page_bytes = 1 << 20;
  int seen = 0;
  for (int pages = 0; pages < 30; ++pages) {
    JobPage page = Page(query);
    int64_t bytes = 0;
    for (const v1::Job& job : page.jobs) bytes += static_cast<int64_t>(job.ByteSizeLong());
    EXPECT_LE(bytes, query.max_page_bytes);
    EXPECT_FALSE(page.jobs.empty());
    seen += static_cast<int>(page.jobs.size());
    if (page.next_before_number == 0) break;
    query.before_number = page.next_before_number;
  }
  EXPECT_EQ(seen, 30) << "every job on some page, once";
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// An ended job leaves memory at the next tick but not the API: it is read
// back whole, listed in its place among live jobs, watched once, and
// counted; cancelling it says it has ended.
TEST_F(JobManagerTest, EndedJobsAreRetiredFromMemoryAndReadBackWhole) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Submit(1));  // no worker: PENDING
  ASSERT_OK(manager_->Cancel(ids[1]));
  ASSERT_OK(manager_->Cancel(ids[3]));
  const v1::Job before = Job(ids[3]);
  manager_->Tick();  // retires ids[1] and ids[3]

  const v1::Job after = Job(ids[3]);
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  absl::Status cancel = manager_->Cancel(ids[3]).status();
  EXPECT_THAT(cancel, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(cancel.message(), absl::StrCat("job ", ids[3], " already ended: CANCELLED"));

  JobQuery query;
  query.page_size = 2;
  std::vector<std::string> listed;
  for (;;) {
    JobPage page = Page(query);
    for (const v1::Job& job : page.jobs) listed.push_back(job.id());
    if (page.next_before_number == 0) break;
    query.before_number = page.next_before_number;
  }
  EXPECT_EQ(listed, (std::vector<std::string>{ids[4], ids[3], ids[2], ids[1], ids[0]}));
  JobQuery cancelled;
  cancelled.states = {v1::CANCELLED};
  EXPECT_EQ(Ids(Page(cancelled)), (std::vector<std::string>{ids[3], ids[1]}));

  std::vector<v1::JobState> seen;
  auto watch = manager_->Watch(ids[1], [&](const v1::Job& job) { seen.push_back(job.state()); });
  ASSERT_OK(watch);
  EXPECT_EQ(*watch, 0) << "nothing to unwatch";
  EXPECT_EQ(seen, (std::vector<v1::JobState>{v1::CANCELLED}));

  Restart();
  std::map<v1::JobState, int> counts = manager_->CountByState();
  EXPECT_EQ(counts[v1::PENDING], 3);
  EXPECT_EQ(counts[v1::CANCELLED], 2);
  EXPECT_EQ(Job(ids[1]).history_size(), 2) << "history read back after a restart";
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// A worker that was away when a job was deleted still holds its logs; it
// says which jobs it holds logs of when it registers, and is told to delete
// those the coordinator no longer knows, not the others.
TEST_F(JobManagerTest, LogsOfJobsDeletedWhileAWorkerWasAwayAreDeletedOnItsReturn) {
  const std::string kept = Submit(1);  // no worker: PENDING
  const std::string ended = Submit(1);
  ASSERT_OK(manager_->Cancel(ended));
  manager_->Tick();  // retired
  const std::string deleted = Submit(1);
  ASSERT_OK(manager_->Cancel(deleted));
  ASSERT_OK(manager_->Delete(deleted));

  TestWorker w1;
  w1.logs_of = {kept, ended, deleted, "never-existed-7"};
  ASSERT_OK(Register(w1, "w1", 0));
  std::vector<std::string> told;
  for (const v1::CoordinatorMessage& m : w1.link.Take()) {
    if (m.has_delete_job_logs()) told.push_back(m.delete_job_logs().job_id());
  }
  EXPECT_EQ(told, (std::vector<std::string>{deleted, "never-existed-7"}));
}

// Deleting a job reaches every worker where it ran, not only its last
// placement: each holds logs/<job> and jobs/<job> (and the uid they keep).
TEST_F(JobManagerTest, DeleteReachesEveryWorkerWhereTheJobRan) {
  TestWorker w1;
  ASSERT_OK(Register(w1, "w1", 1));
  const std::string id = Submit(1, /*max_restarts=*/1);
  Started(w1, id, 0, 0);
  TestWorker w2;
  ASSERT_OK(Register(w2, "w2", 1));
  ASSERT_OK(manager_->Cordon("w1", "moving", "admin").status());
  Exited(w1, id, 0, 0, 1);
  Pass(absl::Minutes(1));  // past the restart's back-off
  ASSERT_EQ(Job(id).attempt(), 1);
  ASSERT_EQ(Job(id).ranks(0).worker_id(), "w2");
  Started(w2, id, 1, 0);
  Exited(w2, id, 1, 0, 0);
  Pass(absl::Seconds(1));
  ASSERT_EQ(Job(id).state(), v1::SUCCEEDED);
  w1.link.Take();
  w2.link.Take();
  ASSERT_OK(manager_->Delete(id));
  for (TestWorker* w : {&w1, &w2}) {
    std::vector<std::string> told;
    for (const v1::CoordinatorMessage& m : w->link.Take()) {
      if (m.has_delete_job_logs()) told.push_back(m.delete_job_logs().job_id());
    }
    EXPECT_EQ(told, std::vector<std::string>{id}) << "a worker was not told";
  }
}

}  // namespace
}  // namespace ringmaster
