// Restarts from the snapshots workers hold in memory, with real rank
// processes on a local cluster: a rank killed at a random step resumes at
// the step it was on, and the job ends with exactly the weights of a run
// never killed.
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

using SnapshotResumeTest = ClusterTest;

// 2 ranks, 10 epochs of 125 steps; the only checkpoint on disk is the
// last step's, which holds the final weights.
std::string Spec(const std::string& name) {
  return absl::StrFormat(R"(
name: %s
ranks: 2
max_restarts: 2
trainer:
  model: {type: mlp, hidden: [256, 256]}
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

TEST_F(SnapshotResumeTest, ARankKilledAtARandomStepResumesFromMemoryToTheSameWeights) {
  const std::string plain = Submit(Spec("plain"));
  v1::Job done = WaitJob(plain, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  ASSERT_EQ(done.progress().step(), 1250);
  absl::StatusOr<TrainingState> reference =
      ReadCheckpointFile(absl::StrCat(state_dir_, "/checkpoints/", plain, "/step-1250/state.bin"));
  ASSERT_OK(reference) << reference.status();

  const std::string killed = Submit(Spec("killed"));
  std::random_device device;
  const int64_t kill_after = std::uniform_int_distribution<int64_t>(100, 900)(device);
  std::cout << "killing rank 1 after step " << kill_after << std::endl;
  v1::Job running = WaitJob(killed, [&](const v1::Job& j) {
    return j.state() == v1::RUNNING && j.progress().step() >= kill_after;
  });
  ASSERT_EQ(running.attempt(), 0) << "the job must not have restarted before the kill";
  ASSERT_EQ(kill(static_cast<pid_t>(running.ranks(1).pid()), SIGKILL), 0);
  v1::Job job = WaitJob(killed, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });

  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.resumed().attempt(), 1);
  EXPECT_EQ(job.resumed().from(), "memory");
  EXPECT_GE(job.resumed().step(), kill_after);
  EXPECT_EQ(job.resumed().steps_redone(), 0);
  EXPECT_GT(job.resumed().seconds(), 0);
  testing::CommandResult logs = Cli({"logs", killed, "--rank", "0", "--attempt", "1"});
  EXPECT_NE(logs.out.find(absl::StrCat("resuming at step ", job.resumed().step(), " from memory")),
            std::string::npos)
      << logs.out;
  testing::CommandResult status = Cli({"status", killed});
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

  absl::StatusOr<TrainingState> final_state =
      ReadCheckpointFile(absl::StrCat(state_dir_, "/checkpoints/", killed, "/step-1250/state.bin"));
  ASSERT_OK(final_state) << final_state.status();
  EXPECT_TRUE(final_state->params == reference->params) << "the weights differ from the run's "
                                                           "never killed";
  EXPECT_TRUE(final_state->optimizer_state == reference->optimizer_state);
}

}  // namespace
}  // namespace ringmaster
