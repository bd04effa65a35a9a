// Restarts from the snapshots workers hold in memory, with real rank
// processes on a local cluster: a rank killed at a random step resumes at
// the step it was on, replaced alone or with every rank restarted, and the
// job ends with exactly the weights of a run never killed.
#include <signal.h>

#include <random>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "testing/status_matchers.h"
#include "tests/cluster_fixture.h"
#include "trainer/checkpoint.h"

namespace ringmaster {
namespace {

// 2 ranks, 10 epochs of 125 steps; the only checkpoint on disk is the
// last step's, which holds the final weights.
std::string Spec(const std::string& name) {
  return absl::StrFormat(R"(
name: %s
ranks: 2
max_restarts: 2
trainer:
  model: {type: mlp, hidden: [1024, 1024]}
  data: {path: "synthetic:rows=20000,features=32,classes=4"}
  epochs: 10
  batch_size: 64
  optimizer: {type: adamw, lr: 0.001, weight_decay: 0.01}
  warmup_steps: 10
  checkpoint_every_steps: 1250
  seed: 5
)",
                         name);
}

// What a kill of rank 1 at a random step left: the killed job once it
// succeeded, its rank 0's pid before the kill, and the final weights of it
// and of a run never killed.
struct Killed {
  std::string id;
  v1::Job job;
  int64_t kill_after = 0;
  int64_t rank0_pid = 0;
  TrainingState reference;
  TrainingState final_state;
};

class SnapshotResumeTest : public ClusterTest {
 protected:
  void KillRank1AtARandomStep(Killed* out);
};

void SnapshotResumeTest::KillRank1AtARandomStep(Killed* out) {
  const std::string plain = Submit(Spec("plain"));
  // 1250 steps take most of a minute under the address sanitizer.
  constexpr absl::Duration kToTheEnd = absl::Minutes(3);
  v1::Job done = WaitJob(
      plain, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; }, kToTheEnd);
  ASSERT_EQ(done.progress().step(), 1250);
  absl::StatusOr<TrainingState> reference =
      ReadCheckpointFile(absl::StrCat(state_dir_, "/checkpoints/", plain, "/step-1250/state.bin"));
  ASSERT_OK(reference) << reference.status();
  out->reference = *std::move(reference);

  out->id = Submit(Spec("killed"));
  std::random_device device;
  out->kill_after = std::uniform_int_distribution<int64_t>(100, 900)(device);
  std::cout << "killing rank 1 after step " << out->kill_after << std::endl;
  v1::Job running = WaitJob(out->id, [&](const v1::Job& j) {
    return j.state() == v1::RUNNING && j.progress().step() >= out->kill_after;
  });
  ASSERT_EQ(running.attempt(), 0) << "the job must not have restarted before the kill";
  out->rank0_pid = running.ranks(0).pid();
  ASSERT_EQ(kill(static_cast<pid_t>(running.ranks(1).pid()), SIGKILL), 0);
  out->job = WaitJob(
      out->id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; }, kToTheEnd);
  absl::StatusOr<TrainingState> final_state = ReadCheckpointFile(
      absl::StrCat(state_dir_, "/checkpoints/", out->id, "/step-1250/state.bin"));
  ASSERT_OK(final_state) << final_state.status();
  out->final_state = *std::move(final_state);
}

// Only rank 1's process is started again; rank 0 keeps its own, and both
// go on from memory.
TEST_F(SnapshotResumeTest, ARankKilledAtARandomStepIsReplacedAloneToTheSameWeights) {
  Killed killed;
  ASSERT_NO_FATAL_FAILURE(KillRank1AtARandomStep(&killed));
  const v1::Job& job = killed.job;
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_EQ(job.group_generation(), 1);
  EXPECT_EQ(job.ranks(0).pid(), killed.rank0_pid) << "rank 0 was started again";
  EXPECT_EQ(job.resumed().attempt(), 0);
  EXPECT_EQ(job.resumed().generation(), 1);
  EXPECT_EQ(job.resumed().from(), "memory");
  EXPECT_GE(job.resumed().step(), killed.kill_after);
  EXPECT_EQ(job.resumed().steps_redone(), 0);
  EXPECT_GT(job.resumed().seconds(), 0);
  testing::CommandResult logs = Cli({"logs", killed.id, "--rank", "0"});
  EXPECT_NE(logs.out.find(absl::StrCat("resuming at step ", job.resumed().step(), " from memory")),
            std::string::npos)
      << logs.out;
  testing::CommandResult status = Cli({"status", killed.id});
  EXPECT_NE(
      status.out.find(absl::StrCat("resumed:   attempt 0, group 1 at step ", job.resumed().step(),
                                   " from memory, the ranks that did not fail keeping "
                                   "their processes, 0 steps redone")),
      std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("RANK_REPLACED"), std::string::npos) << status.out;
  EXPECT_GT(job.goodput().lost_seconds().at("restart"), 0);
  EXPECT_EQ(job.goodput().lost_seconds().count("redone"), 0u);
  std::cout << status.out.substr(0, status.out.find("history:")) << std::endl;
  EXPECT_TRUE(killed.final_state.params == killed.reference.params)
      << "the weights differ from the run's never killed";
  EXPECT_TRUE(killed.final_state.optimizer_state == killed.reference.optimizer_state);
}

// With --regroup-timeout 0 every rank restarts, from the snapshots in
// memory.
class FullRestartResumeTest : public SnapshotResumeTest {
 protected:
  FullRestartResumeTest() { up_args_ = {"--regroup-timeout", "0"}; }
};

TEST_F(FullRestartResumeTest, ARankKilledAtARandomStepResumesFromMemoryToTheSameWeights) {
  Killed killed;
  ASSERT_NO_FATAL_FAILURE(KillRank1AtARandomStep(&killed));
  const v1::Job& job = killed.job;
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.resumed().attempt(), 1);
  EXPECT_EQ(job.resumed().from(), "memory");
  EXPECT_GE(job.resumed().step(), killed.kill_after);
  EXPECT_EQ(job.resumed().steps_redone(), 0);
  EXPECT_GT(job.resumed().seconds(), 0);
  testing::CommandResult logs = Cli({"logs", killed.id, "--rank", "0", "--attempt", "1"});
  EXPECT_NE(logs.out.find(absl::StrCat("resuming at step ", job.resumed().step(), " from memory")),
            std::string::npos)
      << logs.out;
  testing::CommandResult status = Cli({"status", killed.id});
  EXPECT_NE(status.out.find(absl::StrCat("resumed:   attempt 1 at step ", job.resumed().step(),
                                         " from memory on its workers, 0 steps redone")),
            std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("RESUMED"), std::string::npos) << status.out;
  // What the kill cost, in goodput: the restart, nothing redone.
  EXPECT_GT(job.goodput().ratio(), 0);
  EXPECT_LT(job.goodput().ratio(), 1);
  EXPECT_GT(job.goodput().lost_seconds().at("restart"), 0);
  EXPECT_EQ(job.goodput().lost_seconds().count("redone"), 0u);
  EXPECT_NE(status.out.find("goodput:   0."), std::string::npos) << status.out;
  std::cout << status.out.substr(0, status.out.find("history:")) << std::endl;
  EXPECT_TRUE(killed.final_state.params == killed.reference.params)
      << "the weights differ from the run's never killed";
  EXPECT_TRUE(killed.final_state.optimizer_state == killed.reference.optimizer_state);
}

}  // namespace
}  // namespace ringmaster
