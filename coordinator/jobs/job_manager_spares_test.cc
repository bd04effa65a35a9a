// JobManager: spare workers (--spare-workers) kept out of normal placement,
// taken at once by a job that loses a worker, and refilled when workers
// come back.
#include <map>
#include <string>
#include <vector>

#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

class JobManagerSparesTest : public JobManagerTest {
 protected:
  JobManagerSparesTest() {
    options_.scheduling.topology_levels = {"rack", "host"};
    membership_options_.topology_levels = {"rack", "host"};
    options_.scheduling.spare_workers = {0, 1};
    Restart();
  }

  // Registers worker `id` of one slot in `rack`.
  TestWorker& Add(const std::string& id, const std::string& rack) {
    TestWorker& w = workers_[id];
    w.labels = {{"rack", rack}, {"host", id}};
    EXPECT_OK(Register(w, id, 1));
    return w;
  }

  std::vector<std::string> Spares() {
    std::vector<std::string> spares;
    for (const v1::Worker& w : manager_->ListWorkers()) {
      if (w.spare()) spares.push_back(w.id());
    }
    return spares;
  }

  std::vector<std::string> WorkersOf(const std::string& id) {
    std::vector<std::string> workers;
    const v1::Job job = Job(id);
    for (const v1::RankStatus& rank : job.ranks()) workers.push_back(rank.worker_id());
    return workers;
  }

  // Every rank of the job's attempt reports started.
  void StartAll(const std::string& id) {
    const v1::Job job = Job(id);
    for (const v1::RankStatus& rank : job.ranks()) {
      Started(workers_.at(rank.worker_id()), id, job.attempt(), rank.rank());
    }
  }

  // Every running rank of the job's attempt but those on `except` exits,
  // stopped.
  void StopAll(const std::string& id, const std::string& except = "") {
    const v1::Job job = Job(id);
    for (const v1::RankStatus& rank : job.ranks()) {
      if (rank.worker_id() == except || rank.state() != v1::RANK_RUNNING) continue;
      Exited(workers_.at(rank.worker_id()), id, job.attempt(), rank.rank(), 0, /*stopped=*/true);
    }
  }

  // A job of `ranks` ranks, one per worker, packed in one rack.
  static v1::JobSpec Packed(int ranks) {
    v1::JobSpec spec = CommandSpec(ranks);
    spec.set_ranks_per_worker(1);
    spec.set_max_restarts(3);
    spec.mutable_placement()->set_pack("rack");
    return spec;
  }

  std::map<std::string, TestWorker> workers_;
};

TEST_F(JobManagerSparesTest, AJobThatLosesAWorkerTakesTheSpareInItsRackAtOnce) {
  for (const char* id : {"a1", "a2", "a3", "a4", "a5"}) Add(id, "r1");
  Add("b1", "r2");
  Pass(absl::Seconds(1));
  const std::vector<std::string> spares = Spares();
  ASSERT_EQ(spares.size(), 1u);
  const std::string spare = spares[0];
  EXPECT_EQ(spare[0], 'a') << "in the rack with the most idle workers, not " << spare;

  const std::string big = Submit(Packed(4));
  ASSERT_EQ(Job(big).state(), v1::STARTING);
  for (const std::string& w : WorkersOf(big)) EXPECT_NE(w, spare) << "a spare is kept";
  StartAll(big);
  const std::string other = Submit(CommandSpec(1));
  EXPECT_EQ(WorkersOf(other), std::vector<std::string>{"b1"});
  StartAll(other);
  const std::string waiting = Submit(CommandSpec(1));
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(waiting).state(), v1::PENDING) << "the spare is not for it";
  EXPECT_EQ(Job(waiting).pending_reason(), "needs 1 free slots, 0 free on 6 alive workers");

  // kill -9 of one of the big job's workers; rank 0 loses its peer.
  const std::string lost = Job(big).ranks(1).worker_id();
  Disconnect(workers_.at(lost));
  Exited(workers_.at(Job(big).ranks(0).worker_id()), big, 0, 0, 1);
  ASSERT_EQ(Job(big).state(), v1::RESTARTING);
  EXPECT_EQ(Job(big).root_cause().reason(), v1::WORKER_LOST);
  StopAll(big, lost);
  Pass(absl::Seconds(3));  // its back-off, and the tick after
  const v1::Job restarted = Job(big);
  ASSERT_EQ(restarted.state(), v1::STARTING) << restarted.pending_reason();
  std::vector<std::string> now = WorkersOf(big);
  EXPECT_NE(std::find(now.begin(), now.end(), spare), now.end()) << "on the spare";
  EXPECT_EQ(std::find(now.begin(), now.end(), lost), now.end());
  ASSERT_GT(restarted.placed_in_size(), 0);
  EXPECT_EQ(restarted.placed_in(0).domains(0), "r1");
  EXPECT_EQ(Job(other).state(), v1::RUNNING);
  EXPECT_EQ(Job(other).preemptions(), 0) << "no other job gives way";
  EXPECT_EQ(Job(waiting).state(), v1::PENDING);
  EXPECT_TRUE(Spares().empty()) << "no worker is idle to take its place";

  // The lost worker comes back: the pool is full again, and the job that
  // waits still does not get it.
  workers_.at(lost).incarnation.clear();
  ASSERT_OK(Register(workers_.at(lost), lost, 1));
  Pass(absl::Seconds(1));
  EXPECT_EQ(Spares(), std::vector<std::string>{lost});
  EXPECT_EQ(Job(waiting).state(), v1::PENDING);
}

TEST_F(JobManagerSparesTest, ASpareRunsOnlySpareOkJobsThatGiveWayToAJobThatLostAWorker) {
  for (const char* id : {"a1", "a2", "a3"}) Add(id, "r1");
  Pass(absl::Seconds(1));
  ASSERT_EQ(Spares().size(), 1u);
  const std::string spare = Spares()[0];
  const std::string big = Submit(Packed(2));
  StartAll(big);
  v1::JobSpec filler_spec = CommandSpec(1);
  filler_spec.set_spare_ok(true);
  filler_spec.set_priority("high");
  const std::string filler = Submit(filler_spec);
  EXPECT_EQ(WorkersOf(filler), std::vector<std::string>{spare});
  StartAll(filler);
  const std::string normal = Submit(CommandSpec(1));
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(normal).state(), v1::PENDING);
  EXPECT_EQ(Spares(), std::vector<std::string>{spare}) << "a spare_ok job keeps it a spare";

  const std::string lost = Job(big).ranks(0).worker_id();
  Disconnect(workers_.at(lost));
  Exited(workers_.at(Job(big).ranks(1).worker_id()), big, 0, 1, 1);
  ASSERT_EQ(Job(big).state(), v1::RESTARTING);
  StopAll(big, lost);
  Pass(absl::Seconds(3));
  EXPECT_EQ(Job(filler).preemptions(), 1)
      << "of higher priority, but on the spare the job that lost a worker needs";
  StopAll(filler);
  Pass(absl::Seconds(1));
  ASSERT_EQ(Job(big).state(), v1::STARTING) << Job(big).pending_reason();
  std::vector<std::string> now = WorkersOf(big);
  EXPECT_NE(std::find(now.begin(), now.end(), spare), now.end());
  EXPECT_EQ(Job(normal).state(), v1::PENDING);
  EXPECT_EQ(Job(filler).state(), v1::PENDING);
}

TEST_F(JobManagerSparesTest, AJobThatFailedOnAHealthyWorkerDoesNotTakeTheSpare) {
  for (const char* id : {"a1", "a2", "a3"}) Add(id, "r1");
  Pass(absl::Seconds(1));
  const std::string big = Submit(Packed(2));
  StartAll(big);
  const v1::Job job = Job(big);
  Exited(workers_.at(job.ranks(0).worker_id()), big, 0, 0, 1);
  StopAll(big, job.ranks(0).worker_id());
  // Another job takes one of its workers while it backs off.
  Pass(absl::Seconds(1));
  const std::string other = Submit(CommandSpec(1));
  StartAll(other);
  Pass(absl::Seconds(2));
  EXPECT_EQ(Job(big).state(), v1::PENDING) << "its workers are well: it waits for one";
  EXPECT_EQ(Spares().size(), 1u);
}

// Requeued after it failed for a lost worker, a job starts anew: it does
// not go first nor take a spare, even with a worker of its last attempt
// cordoned.
TEST_F(JobManagerSparesTest, ARequeuedJobIsNotOneThatLostAWorker) {
  for (const char* id : {"a1", "a2", "a3"}) Add(id, "r1");
  Pass(absl::Seconds(1));
  v1::JobSpec spec = CommandSpec(1);
  spec.set_max_restarts(0);
  const std::string one = Submit(spec);
  StartAll(one);
  const std::string lost = Job(one).ranks(0).worker_id();
  Disconnect(workers_.at(lost));
  Pass(absl::Seconds(4));  // the worker's grace
  ASSERT_EQ(Job(one).state(), v1::FAILED);
  ASSERT_EQ(Job(one).root_cause().reason(), v1::WORKER_LOST);
  // It comes back, cordoned; another job takes the worker that is left.
  workers_.at(lost).incarnation.clear();
  ASSERT_OK(Register(workers_.at(lost), lost, 1));
  ASSERT_OK(manager_->Cordon(lost, "bad NIC", "admin").status());
  Pass(absl::Seconds(1));
  ASSERT_EQ(Spares().size(), 1u);
  const std::string other = Submit(CommandSpec(1));
  StartAll(other);
  ASSERT_OK(manager_->Requeue(one, "admin").status());
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(one).state(), v1::PENDING) << "the spare is not for it";
}

// An elastic job short of ranks does not count a spare as room to grow:
// it would stop to grow, and be placed as small again.
TEST_F(JobManagerSparesTest, AnElasticJobDoesNotRestartToGrowOntoASpare) {
  for (const char* id : {"a1", "a2"}) Add(id, "r1");
  Pass(absl::Seconds(1));
  ASSERT_EQ(Spares().size(), 1u);
  v1::JobSpec spec = CommandSpec(2);
  spec.set_min_ranks(1);
  spec.set_scale_up_after_s(10);
  const std::string elastic = Submit(spec);
  ASSERT_EQ(Job(elastic).ranks_size(), 1);
  StartAll(elastic);
  Pass(absl::Seconds(60));
  EXPECT_EQ(Job(elastic).state(), v1::RUNNING);
  EXPECT_EQ(Job(elastic).attempt(), 0) << "no restart to grow";
}

}  // namespace
}  // namespace ringmaster
