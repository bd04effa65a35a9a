// The built-in trainer as real rank processes on a local cluster.
#include <cmath>
#include <regex>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "tests/cluster_fixture.h"
#include "trainer/checkpoint.h"
#include "trainer/dataset.h"
#include "trainer/test_world.h"
#include "trainer/trainer.h"

namespace ringmaster {
namespace {

using TrainerJobTest = ClusterTest;

constexpr char kEquivalenceSpec[] = R"(
name: equivalence
ranks: 2
trainer:
  model: {type: mlp, hidden: [32, 24]}
  data: {path: "synthetic:rows=512,features=16,classes=4"}
  epochs: 1
  batch_size: 10
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
  lr_scaling: none
  bucket_mb: 0.001
  checkpoint_every_steps: 20
  seed: 7
)";

// Two rank processes with batch B end with the weights one in-process rank
// reaches with batch 2B: the processes exchange gradients over Gloo's TCP
// transport, bootstrapped through the coordinator's rendezvous store.
TEST_F(TrainerJobTest, TwoRankProcessesMatchOneRankWithDoubleBatch) {
  testing::CommandResult r = Cli({"submit", WriteSpec("eq", kEquivalenceSpec), "--follow"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  auto job = client_->GetJob(id);
  ASSERT_OK(job);
  EXPECT_EQ(job->progress().step(), 20);
  EXPECT_EQ(job->progress().total_steps(), 20);
  EXPECT_GT(job->progress().allreduce_bytes(), 0);
  testing::CommandResult logs = Cli({"logs", id, "--rank", "0"});
  EXPECT_NE(logs.out.find("all-reduce over shared memory"), std::string::npos)
      << "two ranks on one host share memory: " << logs.out;

  auto checkpoint =
      ReadCheckpointFile(absl::StrCat(state_dir_, "/checkpoints/", id, "/step-20/state.bin"));
  ASSERT_OK(checkpoint) << checkpoint.status();

  v1::JobSpec spec;
  spec.mutable_trainer()->mutable_model()->add_hidden(32);
  spec.mutable_trainer()->mutable_model()->add_hidden(24);
  v1::TrainerSpec t = spec.trainer();
  t.set_epochs(1);
  t.set_batch_size(20);
  t.mutable_optimizer()->set_type("sgd");
  t.mutable_optimizer()->set_lr(0.05);
  t.mutable_optimizer()->set_momentum(0.9);
  t.set_lr_scaling("none");
  t.set_bucket_mb(25);
  t.set_seed(7);
  auto all = MakeSynthetic("synthetic:rows=512,features=16,classes=4");
  ASSERT_OK(all);
  const TrainTestSplit data = SplitAndStandardize(*all, 0.2, 7);
  std::vector<float> single;
  RunWorld(1, [&](int, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    auto result = Train(t, data, context);
    ASSERT_OK(result) << result.status();
    EXPECT_EQ(result->steps, 20);
    single = result->params;
  });
  ASSERT_EQ(single.size(), checkpoint->params.size());
  double max_diff = 0;
  for (size_t i = 0; i < single.size(); ++i) {
    const double scale = std::max(1e-3, static_cast<double>(std::fabs(single[i])));
    max_diff = std::max(max_diff, std::fabs(checkpoint->params[i] - single[i]) / scale);
  }
  std::cout << "2 processes vs 1 rank: max relative difference " << max_diff << std::endl;
  EXPECT_LE(max_diff, 1e-5);
}

TEST_F(TrainerJobTest, DemoTrainsDigitsToHighAccuracy) {
  testing::CommandResult r = Cli({"demo", "--state-dir", state_dir_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::smatch m;
  const std::regex line("test accuracy ([0-9.]+), throughput ([0-9]+) samples/s");
  ASSERT_TRUE(std::regex_search(r.out, m, line)) << r.out;
  EXPECT_GE(std::stod(m[1]), 0.95) << r.out;
  EXPECT_GT(std::stod(m[2]), 0) << r.out;
  EXPECT_NE(r.out.find("using the running cluster"), std::string::npos) << r.out;

  auto jobs = client_->ListJobs();
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->size(), 1u);
  testing::CommandResult status = Cli({"status", (*jobs)[0].id()});
  EXPECT_NE(status.out.find("progress:  step 220/220"), std::string::npos) << status.out;
  // lr_scaling's effect is shown, not silent; the time-based checkpoint is on.
  EXPECT_NE(status.out.find("trainer:   adamw, learning rate 0.002 (0.001 x 2 ranks, "
                            "lr_scaling linear); checkpoints every 100 steps or 5m00s"),
            std::string::npos)
      << status.out;
  testing::CommandResult logs = Cli({"logs", (*jobs)[0].id(), "--rank", "0"});
  EXPECT_NE(logs.out.find("[rank 0] final: test accuracy"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("[rank 0] learning rate 0.002: optimizer.lr 0.001 scaled by "
                          "lr_scaling linear at world size 2"),
            std::string::npos)
      << logs.out;
}

}  // namespace
}  // namespace ringmaster
