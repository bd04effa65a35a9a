// A user program instead of the built-in trainer: an unmodified PyTorch DDP
// script (Debian's python3-torch) runs as a 2-rank job under the torchrun
// environment contract.
#include <signal.h>

#include <iostream>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

using PytorchDdpTest = ClusterTest;

TEST_F(PytorchDdpTest, UnmodifiedDdpScriptTrainsOnTwoRanks) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  const std::string spec = absl::StrCat("name: torch-ddp\nranks: 2\ncommand: [/usr/bin/python3, ",
                                        testing::Runfile("tests/ddp_train.py"), "]\n");
  testing::CommandResult r = Cli({"submit", WriteSpec("ddp", spec), "--follow"});
  const std::string id = r.out.substr(0, r.out.find('\n'));
  testing::CommandResult logs = Cli({"logs", id});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << logs.out;
  EXPECT_NE(logs.out.find("[rank 0] rank 0/2 local_rank 0: replicas agree"), std::string::npos)
      << logs.out;
  EXPECT_NE(logs.out.find("[rank 1] rank 1/2 local_rank 0: replicas agree"), std::string::npos)
      << logs.out;
}

// torchrun's error file: the exception a rank recorded is the job's root
// cause, in its reason and in `status`.
TEST_F(PytorchDdpTest, ARanksRecordedExceptionIsTheRootCause) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  const std::string spec =
      absl::StrCat("name: raises\nranks: 2\nmax_restarts: 0\ncommand: [/usr/bin/python3, ",
                   testing::Runfile("tests/raise_on_rank.py"), "]\n");
  testing::CommandResult r = Cli({"submit", WriteSpec("raises", spec), "--follow"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  const v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  ASSERT_TRUE(job.has_root_cause());
  EXPECT_EQ(job.root_cause().error(), "ValueError: bad input on rank 1");
  EXPECT_EQ(job.root_cause().rank(), 1);
  const std::string worker = job.ranks(1).worker_id();
  EXPECT_EQ(job.root_cause().worker_id(), worker);
  EXPECT_EQ(job.history(job.history_size() - 1).message(),
            "rank 1 exited with code 1: ValueError: bad input on rank 1");
  EXPECT_NE(r.out.find("ValueError: bad input on rank 1"), std::string::npos)
      << "--follow shows the reason: " << r.out;
  testing::CommandResult status = Cli({"status", id});
  EXPECT_NE(status.out.find(absl::StrCat("root cause: ValueError: bad input on rank 1 (rank 1 "
                                         "on worker ",
                                         worker, ", attempt 0)")),
            std::string::npos)
      << status.out;
}

// `import ringmaster` with no install: report() and the DDP hook reach the
// job's progress (status, top and --follow read it) and the worker's
// /metrics, as the built-in trainer's do.
TEST_F(PytorchDdpTest, AScriptWithTwoLinesAddedReportsLikeTheTrainer) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  const std::string spec = absl::StrCat("name: reports\nranks: 2\ncommand: [/usr/bin/python3, ",
                                        testing::Runfile("tests/ddp_report.py"), ", '1500']\n");
  // --follow -o json prints the job at each change: the figures arrive
  // while it runs, as the follow bar shows them.
  testing::CommandResult follow =
      Cli({"submit", WriteSpec("reports", spec), "--follow", "-o", "json"});
  ASSERT_EQ(follow.exit_code, 0) << follow.out << follow.err;
  std::string id;
  bool progress_while_running = false;
  for (absl::string_view line : absl::StrSplit(follow.out, '\n', absl::SkipEmpty())) {
    v1::Job seen;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &seen).ok()) << line;
    id = seen.id();
    progress_while_running |= seen.state() == v1::RUNNING && seen.progress().step() > 0 &&
                              seen.progress().samples_per_second() > 0;
  }
  EXPECT_TRUE(progress_while_running) << follow.out.substr(0, 4000);
  const v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  const v1::Progress& p = job.progress();
  EXPECT_EQ(p.step(), 1500);
  EXPECT_EQ(p.total_steps(), 1500);
  EXPECT_GT(p.loss(), 0);
  EXPECT_GT(p.samples_per_second(), 0);
  EXPECT_EQ(p.world_size(), 2);
  EXPECT_EQ(p.backend(), "gloo");
  // Two buckets' worth of float32 gradients per step at least.
  EXPECT_GT(p.allreduce_bytes(), 1500.0 * (64 * 256 + 256 * 4) * 4 * 0.9);
  EXPECT_GT(p.allreduce_seconds(), 0);

  testing::CommandResult status = Cli({"status", id});
  EXPECT_NE(status.out.find("progress:  step 1500/1500"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("allreduce: "), std::string::npos) << status.out;
  bool busbw = false;
  for (const DaemonRecord& d : DaemonRecords()) {
    if (d.role != "worker") continue;
    const std::string metrics = testing::HttpGet(d.metrics_address, "/metrics");
    busbw |= metrics.find(absl::StrCat("ringmaster_allreduce_bus_bandwidth_bytes_per_second{"
                                       "backend=\"gloo\",job_id=\"",
                                       id, "\"")) != std::string::npos;
    EXPECT_NE(metrics.find(absl::StrCat("ringmaster_train_steps_total{job_id=\"", id)),
              std::string::npos)
        << metrics;
  }
  EXPECT_TRUE(busbw) << "a worker exports the job's all-reduce bus bandwidth";
}

// examples/pytorch_checkpoint.py as a 2-rank job of `steps` steps.
std::string CheckpointScriptSpec(const std::string& name, int steps) {
  return absl::StrCat("name: ", name, "\nranks: 2\nmax_restarts: 2\ncommand: [/usr/bin/python3, ",
                      testing::Runfile("examples/pytorch_checkpoint.py"), ", \"", steps,
                      "\", \"0.02\"]\n");
}

// The digest of rank 0's final weights in the script's logs; empty when
// it printed none.
std::string FinalWeights(const std::string& logs) {
  const size_t at = logs.find("[rank 0] rank 0: final weights ");
  return at == std::string::npos ? std::string() : logs.substr(at + 32, 16);
}

// A cluster for examples/pytorch_checkpoint.py.
class CheckpointScriptTest : public ClusterTest {
 protected:
  // Runs the script undisturbed; the digest of its final weights.
  std::string UndisturbedWeights(int steps) {
    testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
    EXPECT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
    testing::CommandResult plain =
        Cli({"submit", WriteSpec("plain", CheckpointScriptSpec("plain", steps)), "--follow"});
    const std::string logs = Cli({"logs", plain.out.substr(0, plain.out.find('\n'))}).out;
    EXPECT_EQ(plain.exit_code, 0) << plain.out << plain.err << logs;
    EXPECT_FALSE(FinalWeights(logs).empty()) << logs;
    return FinalWeights(logs);
  }
};

// A PyTorch script using ringmaster.checkpoint: killed, it resumes at the
// step it was on, from the snapshots its worker kept, and the job ends with
// the weights of a run never killed.
TEST_F(CheckpointScriptTest, ACheckpointedScriptResumesAtTheStepItWasOn) {
  const std::string plain = UndisturbedWeights(300);
  ASSERT_FALSE(HasFailure());
  const std::string id = Submit(CheckpointScriptSpec("killed", 300));
  v1::Job running = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::RUNNING && j.progress().step() >= 100; });
  const int64_t killed_at = running.progress().step();
  ASSERT_EQ(kill(static_cast<pid_t>(running.ranks(1).pid()), SIGKILL), 0);
  v1::Job done = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  EXPECT_EQ(done.attempt(), 1);
  const std::string logs = Cli({"logs", id, "--attempt", "1"}).out;
  const size_t at = logs.find("[rank 0] resumed at step ");
  ASSERT_NE(at, std::string::npos) << logs;
  const int64_t resumed = std::stoll(logs.substr(at + 25));
  EXPECT_GE(resumed, killed_at) << logs;
  std::cout << "rank 1 killed after step " << killed_at << "; resumed at step " << resumed
            << std::endl;
  EXPECT_EQ(FinalWeights(logs), plain) << "the weights differ from the run never killed";
}

// Rank 0's worker is lost while its newest snapshot is also a replica on a
// peer: rank 0 starts again on another worker, which fetches that replica,
// and load() returns its step; the run ends with the weights of one never
// disturbed.
class PytorchReplicaTest : public CheckpointScriptTest {
 protected:
  PytorchReplicaTest() { up_workers_ = 3; }

  // Stops the rank (SIGSTOP), and with it the job, until every rank's
  // newest snapshot is also a replica; when the stop caught a save half
  // done, lets the job go on a few steps and stops it again. The step held;
  // 0 when it never was, with the last snapshot state seen in `last`.
  int64_t HoldStillReplicated(const std::string& id, pid_t rank, std::string* last) {
    int64_t held = 0;
    for (int tries = 0; tries < 5 && held == 0; ++tries) {
      if (kill(rank, SIGSTOP) != 0) return 0;
      int64_t stopped_at = 0;
      testing::WaitFor(
          [&] {
            absl::StatusOr<v1::Job> j = client_->GetJob(id);
            if (!j.ok()) return false;
            stopped_at = j->progress().step();
            const v1::SnapshotState& s = j->snapshots();
            *last = s.ShortDebugString();
            if (s.consistent_step() > 0 && s.consistent_step() == s.newest_step() &&
                s.replica_step() == s.newest_step()) {
              held = s.consistent_step();
            }
            return held > 0;
          },
          absl::Seconds(10));
      if (held > 0) break;
      kill(rank, SIGCONT);
      testing::WaitFor(
          [&] {
            absl::StatusOr<v1::Job> j = client_->GetJob(id);
            return j.ok() && j->progress().step() >= stopped_at + 3;
          },
          absl::Seconds(10));
    }
    return held;
  }
};

TEST_F(PytorchReplicaTest, ACheckpointedScriptWhoseWorkerIsLostResumesFromAPeersReplica) {
  const std::string plain = UndisturbedWeights(400);
  ASSERT_FALSE(HasFailure());
  const std::string id = Submit(CheckpointScriptSpec("lost-worker", 400));
  v1::Job running = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::RUNNING && j.progress().step() >= 100; });
  std::string last;
  const int64_t held = HoldStillReplicated(id, static_cast<pid_t>(running.ranks(0).pid()), &last);
  ASSERT_GT(held, 0) << "the snapshots never held still and replicated; the last seen: " << last;
  const std::string worker = running.ranks(0).worker_id();
  const int index = std::stoi(worker.substr(worker.rfind('-') + 1));
  ASSERT_LT(index, static_cast<int>(WorkerRecords().size()));
  ASSERT_EQ(kill(WorkerRecords()[index].pid, SIGKILL), 0);
  std::cout << "rank 0 held at step " << held << "; its worker " << worker << " killed"
            << std::endl;

  v1::Job done = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  EXPECT_EQ(done.resumed().from(), "replica")
      << done.resumed().DebugString() << Cli({"status", id}).out;
  EXPECT_EQ(done.resumed().step(), held);
  const std::string logs = Cli({"logs", id, "--attempt", absl::StrCat(done.attempt())}).out;
  EXPECT_NE(logs.find(absl::StrCat("[rank 0] resumed at step ", held)), std::string::npos) << logs;
  EXPECT_EQ(FinalWeights(logs), plain) << "the weights differ from the run never killed";
}

}  // namespace
}  // namespace ringmaster
