// Pre-flight on a fake clock: ranks post their figures in the attempt's
// rendezvous scope, and the JobManager gives the verdict once all have: go,
// or the attempt placed again without the worker of a slow or failed rank,
// never counted as a restart, and kept when the job cannot do without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/health/preflight.h"
#include "coordinator/jobs/job_manager_fixture.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

class JobManagerPreflightTest : public JobManagerTest {
 protected:
  // A 3-rank job with pre-flight on `workers` workers of one slot, its
  // ranks started.
  std::string StartJob(int workers) {
    for (int i = 0; i < workers; ++i) {
      EXPECT_OK(Register(w_[i], "w" + std::to_string(i), 1));
    }
    v1::JobSpec spec;
    spec.set_name("train");
    spec.set_ranks(3);
    spec.set_max_restarts(0);
    spec.set_preflight(true);
    spec.add_command("true");
    const std::string job = Submit(spec);
    StartRanks(job);
    return job;
  }
  void StartRanks(const std::string& job) {
    const v1::Job placed = Job(job);
    for (int r = 0; r < 3; ++r) {
      Started(*ByWorker(placed.ranks(r).worker_id()), job, placed.attempt(), r);
    }
  }
  TestWorker* ByWorker(const std::string& id) {
    for (TestWorker& w : w_) {
      if (w.id == id) return &w;
    }
    return nullptr;
  }
  void Post(const std::string& job, int rank, const PreflightReport& report) {
    ASSERT_OK(rendezvous_.Set({job, Job(job).attempt()}, PreflightReportKey(rank),
                              EncodePreflightReport(report)));
  }
  absl::StatusOr<std::string> Verdict(const std::string& job, int attempt) {
    return rendezvous_.Get({job, attempt}, kPreflightVerdictKey);
  }

  TestWorker w_[4];
};

TEST_F(JobManagerPreflightTest, TheVerdictWaitsForEveryRankThenGoes) {
  const std::string job = StartJob(3);
  Post(job, 0, {8.0, 7.9, ""});
  Post(job, 2, {8.2, 7.9, ""});
  Pass(absl::Seconds(1));
  EXPECT_THAT(Verdict(job, 0), IsError()) << "rank 1 has not posted";
  Post(job, 1, {7.7, 7.9, ""});
  Pass(absl::Seconds(1));
  ASSERT_OK(Verdict(job, 0));
  EXPECT_EQ(*Verdict(job, 0), kPreflightGo);
  const v1::Job checked = Job(job);
  EXPECT_EQ(checked.state(), v1::RUNNING);
  EXPECT_TRUE(checked.preflight().passed());
  EXPECT_EQ(checked.preflight().attempt(), 0);
  ASSERT_EQ(checked.preflight().ranks_size(), 3);
  EXPECT_DOUBLE_EQ(checked.preflight().ranks(1).bus_gb_per_s(), 7.7);
  EXPECT_DOUBLE_EQ(checked.preflight().ranks(1).world_gb_per_s(), 7.9);
  EXPECT_EQ(checked.preflight().ranks(1).worker_id(), checked.ranks(1).worker_id());
  EXPECT_TRUE(checked.preflight().ranks(1).excluded().empty());
}

TEST_F(JobManagerPreflightTest, ASlowRanksWorkerIsExcludedAndTheAttemptPlacedAgainUncounted) {
  const std::string job = StartJob(4);
  const std::string slow = Job(job).ranks(2).worker_id();
  Post(job, 0, {8.0, 2.1, ""});
  Post(job, 1, {8.1, 2.1, ""});
  Post(job, 2, {1.5, 2.1, ""});
  Pass(absl::Seconds(1));
  const v1::Job restarting = Job(job);
  EXPECT_EQ(restarting.state(), v1::RESTARTING);
  EXPECT_EQ(Last(job).reason(), v1::PREFLIGHT_FAILED);
  EXPECT_EQ(Last(job).message(),
            absl::StrCat("pre-flight: ", slow,
                         " (rank 2: pre-flight bus bandwidth 1.50 GB/s, under half the job's "
                         "median 8.00 GB/s): placed again without that worker"));
  EXPECT_EQ(restarting.restarts(), 0) << "not counted against max_restarts 0";
  ASSERT_EQ(restarting.excluded_workers_size(), 1);
  EXPECT_EQ(restarting.excluded_workers(0).worker_id(), slow);
  EXPECT_THAT(restarting.excluded_workers(0).reason(), HasSubstr("1.50 GB/s"));
  EXPECT_FALSE(restarting.preflight().passed());
  EXPECT_THAT(restarting.preflight().ranks(2).excluded(), HasSubstr("under half"));
  EXPECT_THAT(Verdict(job, 0), IsError()) << "no go for the stopped attempt";

  for (int r = 0; r < 3; ++r) {
    Exited(*ByWorker(restarting.ranks(r).worker_id()), job, 0, r, 0, /*stopped=*/true);
  }
  Pass(absl::Seconds(1));
  const v1::Job again = Job(job);
  ASSERT_EQ(again.state(), v1::STARTING);
  EXPECT_EQ(again.attempt(), 1);
  for (const v1::RankStatus& rank : again.ranks()) EXPECT_NE(rank.worker_id(), slow);
  // The new attempt runs its own check.
  StartRanks(job);
  for (int r = 0; r < 3; ++r) Post(job, r, {8.0, 7.0, ""});
  Pass(absl::Seconds(1));
  EXPECT_EQ(*Verdict(job, 1), kPreflightGo);
  EXPECT_EQ(Job(job).preflight().attempt(), 1);
  EXPECT_TRUE(Job(job).preflight().passed());
}

TEST_F(JobManagerPreflightTest, AFailedCheckExcludesItsWorkerToo) {
  const std::string job = StartJob(4);
  const std::string failed = Job(job).ranks(0).worker_id();
  Post(job, 0, {0, 0, "connecting to peer rank 1: timed out"});
  Post(job, 1, {8.0, 0, ""});
  Post(job, 2, {8.0, 0, ""});
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(job).state(), v1::RESTARTING);
  EXPECT_THAT(Last(job).message(),
              HasSubstr("its pre-flight all-reduce failed: connecting to peer rank 1: timed out"));
  ASSERT_EQ(Job(job).excluded_workers_size(), 1);
  EXPECT_EQ(Job(job).excluded_workers(0).worker_id(), failed);
}

TEST_F(JobManagerPreflightTest, ASlowWorkerTheJobCannotDoWithoutIsKeptAndSaidSo) {
  const std::string job = StartJob(3);
  Post(job, 0, {8.0, 2.0, ""});
  Post(job, 1, {8.0, 2.0, ""});
  Post(job, 2, {1.0, 2.0, ""});
  Pass(absl::Seconds(1));
  EXPECT_EQ(Job(job).state(), v1::RUNNING);
  EXPECT_EQ(Last(job).reason(), v1::PREFLIGHT_FAILED);
  EXPECT_THAT(Last(job).message(), HasSubstr("; kept: without it the job "));
  EXPECT_EQ(Job(job).excluded_workers_size(), 0);
  EXPECT_EQ(*Verdict(job, 0), kPreflightGo);
}

TEST_F(JobManagerPreflightTest, TheCoordinatorsDefaultAppliesOnlyWhereTheSpecIsSilent) {
  v1::JobSpec spec;
  spec.set_name("quiet");
  spec.set_ranks(1);
  spec.add_command("true");
  EXPECT_FALSE(Job(Submit(spec)).spec().preflight());
  options_.preflight_default = true;
  Restart();
  EXPECT_TRUE(Job(Submit(spec)).spec().preflight());
  spec.set_preflight(false);
  EXPECT_FALSE(Job(Submit(spec)).spec().preflight()) << "the spec's own choice";
  // A job in an image has no trainer to run the check with.
  spec.clear_preflight();
  spec.set_image("registry.example:5000/team/train:1.2");
  EXPECT_FALSE(Job(Submit(spec)).spec().preflight());
}

}  // namespace
}  // namespace ringmaster
