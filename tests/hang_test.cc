// Hang forensics on a real local cluster: when a job is declared hung,
// every rank's stacks go into its log before anything is stopped, and the
// failure names the rank the others wait for; `ringmaster stacks` takes them
// on demand, for the built-in trainer and for a PyTorch DDP script.
#include <signal.h>

#include <regex>

#include <gtest/gtest.h>

#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

class HangTest : public ClusterTest {
 protected:
  void SetUp() override {
    up_slots_ = 2;  // two workers of two slots: four ranks
    ClusterTest::SetUp();
  }
  std::string RankLog(const std::string& job, int rank) {
    return Cli({"logs", job, "--rank", absl::StrCat(rank), "--attempt", "0"}).out;
  }
  const v1::StateChange* Hung(const v1::Job& job) {
    for (const v1::StateChange& c : job.history()) {
      if (c.reason() == v1::RANK_HUNG) return &c;
    }
    return nullptr;
  }
};

TEST_F(HangTest, AStoppedTrainerRankIsTheOneTheOthersWaitFor) {
  const std::string job = Submit(
      "name: stuck\nranks: 4\nmax_restarts: 0\nhang_timeout_s: 5\ntrainer:\n"
      "  data: {path: \"synthetic:rows=8000,features=16,classes=4\"}\n"
      "  model: {hidden: [32]}\n  epochs: 100000\n  batch_size: 16\n");
  const v1::Job running = WaitJob(
      job, [](const v1::Job& j) { return j.state() == v1::RUNNING && j.progress().step() > 20; });
  ASSERT_EQ(running.state(), v1::RUNNING);
  // On demand first: the job runs on.
  testing::CommandResult stacks = Cli({"stacks", job});
  ASSERT_EQ(stacks.exit_code, 0) << stacks.err;
  EXPECT_NE(stacks.out.find("rank 3 on "), std::string::npos) << stacks.out;
  EXPECT_NE(stacks.out.find(absl::StrCat("ringmaster logs ", job, " --attempt 0")),
            std::string::npos)
      << stacks.out;
  EXPECT_EQ(client_->GetJob(job)->state(), v1::RUNNING);

  ASSERT_EQ(kill(static_cast<int>(running.ranks(1).pid()), SIGSTOP), 0);
  const v1::Job failed = WaitJob(job, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  const v1::StateChange* hung = Hung(failed);
  ASSERT_NE(hung, nullptr) << failed.ShortDebugString();
  EXPECT_TRUE(std::regex_search(
      hung->message(), std::regex("ranks 0, 2, 3 wait in all-reduce of bucket [0-9]+ at step "
                                  "[0-9]+ for rank 1; rank 1 is in [a-z0-9 -]+ \\(stopped\\)")))
      << hung->message();
  EXPECT_EQ(failed.stacks().summary(), hung->message().substr(hung->message().find("ranks 0")));
  const std::string stopped = RankLog(job, 1);
  EXPECT_NE(stopped.find("----- ringmaster: stacks of rank 1 (pid "), std::string::npos) << stopped;
  EXPECT_NE(stopped.find(", stopped): declared hung: "), std::string::npos) << stopped;
  EXPECT_NE(stopped.find("native stacks:"), std::string::npos) << stopped;
  EXPECT_NE(stopped.find("TID "), std::string::npos) << "eu-stack's threads: " << stopped;
  EXPECT_NE(RankLog(job, 0).find("flight record: step "), std::string::npos) << RankLog(job, 0);
  testing::CommandResult status = Cli({"status", job});
  EXPECT_NE(status.out.find("stacks:    attempt 0"), std::string::npos) << status.out;
}

TEST_F(HangTest, ASleepingPytorchRanksStackIsInItsLog) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  const std::string job = Submit(absl::StrCat(
      "name: asleep\nranks: 3\nmax_restarts: 0\nhang_timeout_s: 10\ncommand: [/usr/bin/python3, ",
      testing::Runfile("tests/ddp_stall.py"), "]\n"));
  const v1::Job failed = WaitJob(job, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  const v1::StateChange* hung = Hung(failed);
  ASSERT_NE(hung, nullptr) << failed.ShortDebugString();
  EXPECT_NE(hung->message().find("rank 1: in File \""), std::string::npos) << hung->message();
  EXPECT_NE(hung->message().find("in stall (sleeping)"), std::string::npos) << hung->message();
  for (int rank = 0; rank < 3; ++rank) {
    const std::string log = RankLog(job, rank);
    EXPECT_NE(log.find(absl::StrCat("----- ringmaster: stacks of rank ", rank)), std::string::npos)
        << log;
    EXPECT_NE(log.find("python stacks:"), std::string::npos) << "rank " << rank << ": " << log;
    EXPECT_NE(log.find("(most recent call first)"), std::string::npos) << log;
  }
  EXPECT_TRUE(std::regex_search(RankLog(job, 1), std::regex("ddp_stall.py\", line [0-9]+ in "
                                                            "stall")))
      << "the sleeping line: " << RankLog(job, 1);
}

}  // namespace
}  // namespace ringmaster
