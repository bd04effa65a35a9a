#include "coordinator/health/worker_health.h"

#include <csignal>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

// A job whose rank r ran on workers[r].
v1::Job JobOn(const std::string& id, const std::vector<std::string>& workers) {
  v1::Job job;
  job.set_id(id);
  job.set_attempt(1);
  for (size_t r = 0; r < workers.size(); ++r) {
    v1::RankStatus* rank = job.add_ranks();
    rank->set_rank(static_cast<int>(r));
    rank->set_worker_id(workers[r]);
  }
  return job;
}

FailureCause Signaled(int rank, int signal) {
  return {v1::RANK_SIGNALED,
          "rank " + std::to_string(rank) + " was killed by signal " + std::to_string(signal), rank,
          0, signal};
}

Blame BlameOn(const std::string& job_id, const std::string& worker, absl::Time at) {
  std::optional<Blame> blame = BlameOf(JobOn(job_id, {worker}), Signaled(0, SIGSEGV), at);
  EXPECT_TRUE(blame.has_value());
  return *blame;
}

TEST(BlameOfTest, BlamesStartFailuresAndSignalsOnTheirOwnWorker) {
  const v1::Job job = JobOn("job-1", {"w0", "w1"});
  std::optional<Blame> blame = BlameOf(job, Signaled(1, SIGSEGV), kStart);
  ASSERT_TRUE(blame.has_value());
  EXPECT_EQ(blame->worker_id, "w1");
  EXPECT_EQ(blame->failure.job_id(), "job-1");
  EXPECT_EQ(blame->failure.rank(), 1);
  EXPECT_EQ(blame->failure.time_unix_ms(), absl::ToUnixMillis(kStart));

  blame = BlameOf(job, {v1::RANK_START_FAILED, "rank 0 could not start: exec failed", 0}, kStart);
  ASSERT_TRUE(blame.has_value());
  EXPECT_EQ(blame->worker_id, "w0");
}

TEST(BlameOfTest, BlamesTheNamedPeerOfALostCollective) {
  const v1::Job job = JobOn("job-1", {"w0", "w1", "w2"});
  FailureCause cause{v1::RANK_EXITED, "rank 0 exited with code 1", 0, 1};
  cause.error = "all-reduce of bucket 3 failed: connection to peer rank 2 closed";
  std::optional<Blame> blame = BlameOf(job, cause, kStart);
  ASSERT_TRUE(blame.has_value());
  EXPECT_EQ(blame->worker_id, "w2");
  EXPECT_EQ(blame->failure.rank(), 2);
  EXPECT_THAT(blame->failure.message(), HasSubstr("rank 0 lost its peer rank 2"));
}

TEST(BlameOfTest, BlamesNoMachineForTheJobsOwnEnds) {
  const v1::Job job = JobOn("job-1", {"w0", "w1"});
  EXPECT_FALSE(BlameOf(job, {v1::RANK_EXITED, "rank 0 exited with code 3", 0, 3}, kStart));
  EXPECT_FALSE(BlameOf(job, {v1::RANK_OOM, "rank 0 was killed", 0, 0, SIGKILL}, kStart));
  EXPECT_FALSE(BlameOf(job, {v1::RANK_HUNG, "rank 1 made no progress", 1}, kStart));
  EXPECT_FALSE(BlameOf(job, Signaled(0, SIGTERM), kStart)) << "asked to stop";
  FailureCause stopped = Signaled(0, SIGKILL);
  stopped.stopped = true;
  EXPECT_FALSE(BlameOf(job, stopped, kStart)) << "stopped by its worker on purpose";
  FailureCause peer{v1::RANK_EXITED, "lost peer rank 7", 0, 1};
  EXPECT_FALSE(BlameOf(job, peer, kStart)) << "no such rank";
}

TEST(WorkerCountTest, ParsesShareOrCount) {
  absl::StatusOr<WorkerCount> share = ParseWorkerCount("--max-quarantined", "20%");
  ASSERT_TRUE(share.ok());
  EXPECT_EQ(share->Of(10), 2);
  EXPECT_EQ(share->Of(4), 0);
  absl::StatusOr<WorkerCount> count = ParseWorkerCount("--max-quarantined", "1");
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(count->Of(3), 1);
  EXPECT_THAT(std::string(ParseWorkerCount("--max-quarantined", "lots").status().message()),
              HasSubstr("--max-quarantined \"lots\" is neither"));
  EXPECT_THAT(ParseWorkerCount("--max-quarantined", "120%"), IsError());
  EXPECT_THAT(ParseWorkerCount("--max-quarantined", "-1"), IsError());
}

HealthOptions Options(const std::string& max = "20%") {
  HealthOptions options;
  options.max_quarantined = *ParseWorkerCount("--max-quarantined", max);
  return options;
}

TEST(HealthRecordsTest, QuarantinesAfterFailuresOfTwoJobsWithinTheWindow) {
  HealthRecords health(Options());
  HealthRecords::Verdict first = health.Record(BlameOn("job-1", "w1", kStart), kStart, 10);
  EXPECT_FALSE(first.quarantined);
  // The same job again is still one job.
  EXPECT_FALSE(
      health.Record(BlameOn("job-1", "w1", kStart), kStart + absl::Minutes(1), 10).quarantined);
  EXPECT_FALSE(health.Cordoned("w1"));

  const absl::Time at = kStart + absl::Minutes(9);
  HealthRecords::Verdict second = health.Record(BlameOn("job-2", "w1", at), at, 10);
  EXPECT_TRUE(second.quarantined);
  EXPECT_TRUE(health.Cordoned("w1"));
  const v1::Cordon& cordon = health.Find("w1")->cordon();
  EXPECT_EQ(cordon.by(), "ringmaster");
  EXPECT_TRUE(cordon.automatic());
  EXPECT_EQ(cordon.until_unix_ms(), absl::ToUnixMillis(at + absl::Hours(1)));
  EXPECT_THAT(cordon.reason(), HasSubstr("quarantined: failures of 2 jobs within 10m"));
  EXPECT_THAT(cordon.reason(), HasSubstr("job-1: rank 0 was killed by signal 11"));
  EXPECT_THAT(cordon.reason(), HasSubstr("job-2: rank 0 was killed by signal 11"));
  ASSERT_FALSE(second.changed.empty());
  EXPECT_TRUE(second.changed.back().has_cordon()) << "the record to store";
}

TEST(HealthRecordsTest, FailuresOlderThanTheWindowAreForgotten) {
  HealthRecords health(Options());
  health.Record(BlameOn("job-1", "w1", kStart), kStart, 10);
  const absl::Time later = kStart + absl::Minutes(10) + absl::Seconds(1);
  EXPECT_FALSE(health.Record(BlameOn("job-2", "w1", later), later, 10).quarantined);
  EXPECT_EQ(health.Find("w1")->failures_size(), 1);
}

TEST(HealthRecordsTest, ReleasedOnProbationWhereOneMoreFailureCordonsAgain) {
  HealthRecords health(Options());
  health.Record(BlameOn("job-1", "w1", kStart), kStart, 10);
  ASSERT_TRUE(health.Record(BlameOn("job-2", "w1", kStart), kStart, 10).quarantined);

  EXPECT_TRUE(health.Expire(kStart + absl::Minutes(59)).empty());
  EXPECT_TRUE(health.Cordoned("w1"));
  const absl::Time released = kStart + absl::Hours(1);
  std::vector<v1::WorkerHealth> changed = health.Expire(released);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_FALSE(health.Cordoned("w1"));
  EXPECT_EQ(changed[0].probation_until_unix_ms(), absl::ToUnixMillis(released + absl::Hours(1)));
  EXPECT_EQ(changed[0].failures_size(), 0);

  const absl::Time again = released + absl::Minutes(30);
  HealthRecords::Verdict verdict = health.Record(BlameOn("job-3", "w1", again), again, 10);
  EXPECT_TRUE(verdict.quarantined) << "one failure is enough on probation";
  EXPECT_THAT(health.Find("w1")->cordon().reason(),
              HasSubstr("quarantined: failed again on probation: job-3"));
}

TEST(HealthRecordsTest, ProbationEnds) {
  HealthRecords health(Options());
  health.Record(BlameOn("job-1", "w1", kStart), kStart, 10);
  health.Record(BlameOn("job-2", "w1", kStart), kStart, 10);
  health.Expire(kStart + absl::Hours(1));
  const absl::Time after = kStart + absl::Hours(2);
  health.Expire(after);
  EXPECT_EQ(health.Find("w1")->probation_until_unix_ms(), 0);
  EXPECT_FALSE(health.Record(BlameOn("job-3", "w1", after), after, 10).quarantined);
}

TEST(HealthRecordsTest, SafetyValveKeepsMostWorkersSchedulable) {
  HealthRecords health(Options("20%"));
  // 20% of 5 workers is one.
  health.Record(BlameOn("job-1", "w1", kStart), kStart, 5);
  ASSERT_TRUE(health.Record(BlameOn("job-2", "w1", kStart), kStart, 5).quarantined);
  health.Record(BlameOn("job-3", "w2", kStart), kStart, 5);
  HealthRecords::Verdict spared = health.Record(BlameOn("job-4", "w2", kStart), kStart, 5);
  EXPECT_FALSE(spared.quarantined);
  EXPECT_FALSE(health.Cordoned("w2"));
  EXPECT_THAT(spared.spared, HasSubstr("worker w2 is not quarantined"));
  EXPECT_THAT(spared.spared, HasSubstr("1 of 5 workers already are (--max-quarantined 20%)"));

  HealthRecords small(Options("20%"));  // 20% of 3 workers: none
  small.Record(BlameOn("job-1", "w1", kStart), kStart, 3);
  EXPECT_FALSE(small.Record(BlameOn("job-2", "w1", kStart), kStart, 3).quarantined);
  HealthRecords counted(Options("1"));
  counted.Record(BlameOn("job-1", "w1", kStart), kStart, 3);
  EXPECT_TRUE(counted.Record(BlameOn("job-2", "w1", kStart), kStart, 3).quarantined);
}

TEST(HealthRecordsTest, AJobThatFailsEverywhereIsAtFaultNotTheMachines) {
  HealthRecords health(Options("50%"));
  health.Record(BlameOn("job-1", "w1", kStart), kStart, 10);
  ASSERT_TRUE(health.Record(BlameOn("bad", "w1", kStart), kStart, 10).quarantined);
  EXPECT_TRUE(health.Record(BlameOn("bad", "w2", kStart), kStart, 10).job_fault.empty());
  HealthRecords::Verdict verdict = health.Record(BlameOn("bad", "w3", kStart), kStart, 10);
  EXPECT_THAT(verdict.job_fault, HasSubstr("it failed on 3 different workers (w1, w2, w3)"));
  EXPECT_THAT(verdict.job_fault, HasSubstr("the fault is the job's, not the machines'"));
  EXPECT_FALSE(verdict.quarantined);
  // w1's quarantine stood on job "bad"'s failure: it is lifted.
  EXPECT_FALSE(health.Cordoned("w1"));
  for (const char* w : {"w1", "w2", "w3"}) {
    for (const v1::WorkerFailure& f : health.Find(w)->failures()) EXPECT_NE(f.job_id(), "bad");
  }
  // On a two-worker cluster, both workers are everywhere.
  HealthRecords pair(Options("1"));
  pair.Record(BlameOn("bad", "w1", kStart), kStart, 2);
  EXPECT_FALSE(pair.Record(BlameOn("bad", "w2", kStart), kStart, 2).job_fault.empty());
}

v1::GpuError Xid(int gpu, int xid) {
  v1::GpuError error;
  error.set_gpu(gpu);
  error.set_uuid("GPU-" + std::to_string(gpu));
  error.set_kind(v1::GPU_ERROR_XID);
  error.set_xid(xid);
  return error;
}

TEST(HealthRecordsTest, ABrokenGpuCordonsItsWorkerUntilAPersonUncordonsIt) {
  HealthRecords health(Options("0"));  // no quarantine allowed: XIDs are not held back
  bool cordoned = false;
  v1::WorkerHealth record = health.RecordGpuError("w1", Xid(0, 13), kStart, &cordoned);
  EXPECT_FALSE(cordoned) << "XID 13 is the program's";
  ASSERT_EQ(record.gpu_errors_size(), 1);
  EXPECT_EQ(record.gpu_errors(0).meaning(), "graphics engine exception");
  EXPECT_FALSE(record.gpu_errors(0).cordoned());

  record = health.RecordGpuError("w1", Xid(3, 79), kStart, &cordoned);
  EXPECT_TRUE(cordoned);
  EXPECT_EQ(record.cordon().reason(), "GPU 3 (GPU-3) reported XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(record.cordon().by(), "ringmaster");
  EXPECT_TRUE(record.cordon().automatic());
  EXPECT_EQ(record.cordon().until_unix_ms(), 0);
  EXPECT_TRUE(record.gpu_errors(1).cordoned());
  health.Expire(kStart + absl::Hours(24));
  EXPECT_TRUE(health.Cordoned("w1")) << "no time heals a broken GPU";

  // Another error keeps the first reason; a person's cordon stays a person's.
  record = health.RecordGpuError("w1", Xid(2, 48), kStart, &cordoned);
  EXPECT_FALSE(cordoned);
  EXPECT_THAT(record.cordon().reason(), HasSubstr("XID 79"));
  health.Cordon("w2", "maintenance", "admin", kStart, false);
  record = health.RecordGpuError("w2", Xid(0, 74), kStart, &cordoned);
  EXPECT_FALSE(cordoned);
  EXPECT_EQ(record.cordon().reason(), "maintenance");

  v1::GpuError ecc;
  ecc.set_gpu(1);
  ecc.set_kind(v1::GPU_ERROR_ECC_UNCORRECTABLE);
  ecc.set_count(2);
  record = health.RecordGpuError("w3", ecc, kStart, &cordoned);
  EXPECT_TRUE(cordoned);
  EXPECT_EQ(record.cordon().reason(), "GPU 1 reported 2 uncorrectable ECC errors");
  v1::GpuError retired;
  retired.set_kind(v1::GPU_ERROR_RETIRED_PAGES);
  retired.set_count(5);
  record = health.RecordGpuError("w4", retired, kStart, &cordoned);
  EXPECT_FALSE(cordoned) << "retired pages are the GPU coping";

  for (int i = 0; i < 20; ++i) health.RecordGpuError("w5", Xid(0, 13), kStart, &cordoned);
  EXPECT_EQ(health.Find("w5")->gpu_errors_size(), HealthRecords::kGpuErrorsKept);
}

TEST(HealthRecordsTest, XidMeanings) {
  for (int xid : {48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120}) {
    EXPECT_TRUE(CriticalXid(xid)) << xid;
    EXPECT_FALSE(XidMeaning(xid).empty()) << xid;
  }
  for (int xid : {13, 31, 43, 45, 999}) EXPECT_FALSE(CriticalXid(xid)) << xid;
  EXPECT_EQ(XidMeaning(999), "");
}

TEST(HealthRecordsTest, PeopleCordonAndUncordon) {
  HealthRecords health(Options());
  EXPECT_FALSE(health.AnyCordoned());
  v1::WorkerHealth record = health.Cordon("w1", "new NIC", "admin", kStart, false);
  EXPECT_TRUE(health.AnyCordoned());
  EXPECT_EQ(record.cordon().reason(), "new NIC");
  EXPECT_EQ(record.cordon().by(), "admin");
  EXPECT_EQ(record.cordon().since_unix_ms(), absl::ToUnixMillis(kStart));
  EXPECT_FALSE(record.cordon().automatic());
  // Cordoning again keeps when it began; a drain is remembered.
  record = health.Cordon("w1", "draining", "admin", kStart + absl::Minutes(5), true);
  EXPECT_EQ(record.cordon().since_unix_ms(), absl::ToUnixMillis(kStart));
  EXPECT_TRUE(record.cordon().drained());
  // A person's cordon does not expire.
  health.Expire(kStart + absl::Hours(48));
  EXPECT_TRUE(health.Cordoned("w1"));
  record = health.Uncordon("w1");
  EXPECT_FALSE(record.has_cordon());
  EXPECT_FALSE(health.AnyCordoned());

  HealthRecords loaded(Options());
  loaded.Load({health.Cordon("w2", "x", "admin", kStart, false)});
  EXPECT_TRUE(loaded.Cordoned("w2"));
  EXPECT_TRUE(loaded.AnyCordoned());
}

}  // namespace
}  // namespace ringmaster
