// Worker health on a real local cluster: a drain moves a running trainer
// job to another worker, where it resumes from the checkpoint it took on
// SIGTERM without counting a restart; a worker on which the ranks of two
// jobs die is quarantined, and the next job runs elsewhere; a GPU's XID 79
// cordons its worker.
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

class HealthTest : public ClusterTest {
 protected:
  // The coordinator's ringmaster_worker_cordoned of `worker`, or -1.
  double CordonedMetric(const std::string& worker) {
    const std::string text = testing::HttpGet(DaemonRecords()[0].metrics_address, "/metrics");
    std::smatch m;
    if (!std::regex_search(
            text, m,
            std::regex("ringmaster_worker_cordoned\\{worker=\"" + worker + "\"\\} ([0-9]+)"))) {
      return -1;
    }
    return std::stod(m[1]);
  }
  // The `workers` table's line of `worker`.
  std::string WorkersLine(const std::string& worker) {
    testing::CommandResult workers = Cli({"workers"});
    EXPECT_EQ(workers.exit_code, 0) << workers.err;
    std::smatch m;
    if (!std::regex_search(workers.out, m, std::regex("\n" + worker + " [^\n]*"))) return "";
    return m[0].str().substr(1);
  }
};

class DrainTest : public HealthTest {
 protected:
  void SetUp() override {
    up_slots_ = 2;
    HealthTest::SetUp();
  }
};

TEST_F(DrainTest, ADrainedTrainerResumesElsewhereFromItsSigtermCheckpointWithoutARestart) {
  const std::string job = Submit(
      "name: drained\nranks: 2\nmax_restarts: 0\ntrainer:\n"
      "  data: {path: \"synthetic:rows=8000,features=16,classes=4\"}\n"
      "  model: {hidden: [32]}\n  epochs: 300\n  batch_size: 16\n"
      "  checkpoint_every_steps: 100000\n");
  v1::Job running = WaitJob(job, [](const v1::Job& j) { return j.progress().step() >= 5; });
  const std::string from = running.ranks(0).worker_id();
  ASSERT_EQ(running.ranks(1).worker_id(), from) << "two slots each: the job is on one worker";
  const std::string to = from == "local-0" ? "local-1" : "local-0";

  testing::CommandResult drain =
      Cli({"drain", from, "--grace", "30s", "--reason", "kernel upgrade"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_NE(drain.out.find(absl::StrCat("worker ", from, " CORDONED: drained by admin since ")),
            std::string::npos)
      << drain.out;
  EXPECT_NE(drain.out.find(absl::StrCat("\nstopping ", job, " with a 30s grace")),
            std::string::npos)
      << drain.out;
  const std::string line = WorkersLine(from);
  EXPECT_TRUE(std::regex_search(line, std::regex(" CORDONED .*drained by admin since [0-9-]+ "
                                                 "[0-9:]+ UTC \\([0-9]+s ago\\): kernel upgrade")))
      << line;
  EXPECT_EQ(CordonedMetric(from), 1);
  EXPECT_EQ(CordonedMetric(to), 0);

  v1::Job done = WaitJob(job, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.attempt(), 1);
  for (const v1::RankStatus& rank : done.ranks()) EXPECT_EQ(rank.worker_id(), to);
  bool drained = false;
  for (const v1::StateChange& c : done.history()) {
    if (c.reason() != v1::WORKER_DRAINED) continue;
    drained = true;
    EXPECT_EQ(c.message(), absl::StrCat("worker ", from,
                                        " drained by admin (kernel upgrade): resumes elsewhere "
                                        "from a checkpoint taken on stop"));
  }
  EXPECT_TRUE(drained) << "the history says why it moved";

  testing::CommandResult before = Cli({"logs", job, "--rank", "0", "--attempt", "0"});
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(before.out, stopped, std::regex("stopped after step ([0-9]+)")))
      << before.out;
  testing::CommandResult after = Cli({"logs", job, "--rank", "0", "--attempt", "1"});
  // From the checkpoint it took on stop, or from the snapshot of the same
  // step its workers hold in memory.
  const std::string from_disk =
      absl::StrCat("resuming from ", state_dir_, "/checkpoints/", job, "/step-", stopped[1].str());
  const std::string from_memory =
      absl::StrCat("resuming at step ", stopped[1].str(), " from memory");
  EXPECT_TRUE(after.out.find(from_disk) != std::string::npos ||
              after.out.find(from_memory) != std::string::npos)
      << "attempt 0 stopped after step " << stopped[1] << "; attempt 1 says:\n"
      << after.out;

  testing::CommandResult uncordon = Cli({"uncordon", from});
  ASSERT_EQ(uncordon.exit_code, 0) << uncordon.err;
  EXPECT_EQ(uncordon.out, absl::StrCat("worker ", from, " SCHEDULABLE\n"));
  EXPECT_EQ(CordonedMetric(from), 0);
  testing::CommandResult unknown = Cli({"cordon", "local-9"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no worker \"local-9\""), std::string::npos) << unknown.err;
}

class QuarantineTest : public HealthTest {
 protected:
  void SetUp() override {
    up_workers_ = 3;
    up_args_ = {"--max-quarantined", "1"};  // 20% of 3 workers is none
    HealthTest::SetUp();
  }
  // One rank per worker; the rank on local-1 dies of SIGSEGV.
  std::string FailingOnLocal1(const std::string& name, int ranks) {
    return absl::StrCat(
        "name: ", name, "\nranks: ", ranks,
        "\nranks_per_worker: 1\nmax_restarts: 0\ncommand: [sh, -c, 'if [ "
        "\"$RINGMASTER_WORKER_ID\" = local-1 ]; then kill -SEGV $$; fi; sleep 1']\n");
  }
};

TEST_F(QuarantineTest, AWorkerWhereTwoJobsDieIsQuarantinedAndTheNextJobRunsElsewhere) {
  std::vector<std::string> failed;  // "first-1: rank 2 was killed by signal 11"
  for (const char* name : {"first", "second"}) {
    const std::string id = Submit(FailingOnLocal1(name, 3));
    v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
    EXPECT_EQ(job.root_cause().worker_id(), "local-1");
    EXPECT_EQ(job.root_cause().signal(), 11);
    failed.push_back(
        absl::StrCat(id, ": rank ", job.root_cause().rank(), " was killed by signal 11"));
  }
  auto workers = client_->ListWorkers();
  ASSERT_OK(workers);
  for (const v1::Worker& w : *workers) {
    if (w.id() != "local-1") {
      EXPECT_FALSE(w.health().has_cordon()) << w.id();
      continue;
    }
    const v1::Cordon& cordon = w.health().cordon();
    EXPECT_EQ(cordon.by(), "ringmaster");
    EXPECT_TRUE(cordon.automatic());
    EXPECT_NE(cordon.reason().find("quarantined: failures of 2 jobs within 10m"), std::string::npos)
        << cordon.reason();
    for (const std::string& failure : failed) {
      EXPECT_NE(cordon.reason().find(failure), std::string::npos) << cordon.reason();
    }
    EXPECT_GT(cordon.until_unix_ms(), cordon.since_unix_ms());
  }
  EXPECT_TRUE(std::regex_search(WorkersLine("local-1"),
                                std::regex(" CORDONED .*cordoned by ringmaster since .* until "
                                           ".*: quarantined: failures of 2 jobs")))
      << WorkersLine("local-1");
  EXPECT_EQ(CordonedMetric("local-1"), 1);

  const std::string next = Submit(FailingOnLocal1("next", 2));
  v1::Job done = WaitJob(
      next, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.root_cause().message();
  for (const v1::RankStatus& rank : done.ranks()) EXPECT_NE(rank.worker_id(), "local-1");
}

// Workers with two GPUs each (the fake NVML library), whose errors the test
// injects through each worker's control file.
class GpuErrorTest : public HealthTest {
 protected:
  void SetUp() override {
    control_dir_ = testing::MakeTempDir("nvml");
    extra_env_["RINGMASTER_NVML_LIBRARY"] = testing::Runfile("worker/testing/libfake_nvml.so");
    extra_env_["FAKE_NVML_DEVICES"] =
        "GPU-aaaa:0:0:17179869184:0:0:0:0;GPU-bbbb:0:0:17179869184:0:0:0:0";
    extra_env_["FAKE_NVML_CONTROL"] = control_dir_ + "/control-{pid}";
    HealthTest::SetUp();
  }
  // Appends `line` to the fake NVML control file of worker `index`.
  void Inject(int index, const std::string& line) {
    std::ofstream(absl::StrCat(control_dir_, "/control-", WorkerRecords()[index].pid),
                  std::ios::app)
        << line << "\n";
  }
  const v1::Cordon* CordonOf(const std::string& worker) {
    auto workers = client_->ListWorkers();
    if (!workers.ok()) return nullptr;
    for (const v1::Worker& w : *workers) {
      if (w.id() == worker && w.health().has_cordon()) {
        cordon_ = w.health().cordon();
        return &cordon_;
      }
    }
    return nullptr;
  }

  std::string control_dir_;
  v1::Cordon cordon_;
};

TEST_F(GpuErrorTest, AnXidThatMeansABrokenGpuCordonsItsWorkerWithinTwoSeconds) {
  Inject(1, "xid 0 13");  // the program's fault: counted, not cordoned
  Inject(1, "xid 1 79");
  const absl::Time injected = absl::Now();
  ASSERT_TRUE(testing::WaitFor([&] { return CordonOf("local-1") != nullptr; }, absl::Seconds(10)));
  const absl::Duration took = absl::Now() - injected;
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_EQ(cordon_.reason(), "GPU 1 (GPU-bbbb) reported XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(cordon_.by(), "ringmaster");
  EXPECT_EQ(CordonOf("local-0"), nullptr);

  auto workers = client_->ListWorkers();
  ASSERT_OK(workers);
  for (const v1::Worker& w : *workers) {
    if (w.id() != "local-1") continue;
    ASSERT_EQ(w.health().gpu_errors_size(), 2);
    EXPECT_EQ(w.health().gpu_errors(0).xid(), 13);
    EXPECT_EQ(w.health().gpu_errors(0).meaning(), "graphics engine exception");
    EXPECT_FALSE(w.health().gpu_errors(0).cordoned());
    EXPECT_EQ(w.health().gpu_errors(1).xid(), 79);
    EXPECT_TRUE(w.health().gpu_errors(1).cordoned());
  }
  const std::string metrics = testing::HttpGet(WorkerRecords()[1].metrics_address, "/metrics");
  EXPECT_NE(metrics.find("ringmaster_gpu_xid_errors_total{gpu=\"1\",worker=\"local-1\","
                         "xid=\"79\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("ringmaster_gpu_xid_errors_total{gpu=\"0\",worker=\"local-1\","
                         "xid=\"13\"} 1\n"),
            std::string::npos);

  // A GPU job goes to the other worker only.
  const std::string job = Submit("name: gpu\nranks: 1\ngpus_per_rank: 2\ncommand: [true]\n");
  v1::Job done = WaitJob(job, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  EXPECT_EQ(done.ranks(0).worker_id(), "local-0");

  Inject(0, "ecc 0 2");
  ASSERT_TRUE(testing::WaitFor([&] { return CordonOf("local-0") != nullptr; }, absl::Seconds(10)));
  EXPECT_EQ(cordon_.reason(), "GPU 0 (GPU-aaaa) reported a double-bit ECC error");
}

}  // namespace
}  // namespace ringmaster
