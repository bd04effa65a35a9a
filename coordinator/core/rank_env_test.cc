#include "coordinator/core/rank_env.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::Job TwoWorkerJob() {
  v1::Job job;
  job.set_id("ddp-7");
  job.set_attempt(2);
  job.set_world_size(3);
  job.set_master_addr("10.1.2.3");
  job.set_master_port(41234);
  job.mutable_spec()->set_max_restarts(5);
  (*job.mutable_spec()->mutable_env())["FOO"] = "bar";
  const char* workers[] = {"w-a", "w-a", "w-b"};
  for (int r = 0; r < 3; ++r) {
    auto* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(workers[r]);
    rank->set_slot(r % 2);
  }
  job.mutable_ranks(2)->add_gpus(1);
  job.mutable_ranks(2)->add_gpus(3);
  return job;
}

TEST(RankEnvTest, FullTorchrunContract) {
  const v1::Job job = TwoWorkerJob();
  auto env = BuildRankEnv(job, 2, {"127.0.0.1:7070", "/ckpt"});
  EXPECT_EQ(env["RANK"], "2");
  EXPECT_EQ(env["LOCAL_RANK"], "0");
  EXPECT_EQ(env["WORLD_SIZE"], "3");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "1");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(env["ROLE_RANK"], "2");
  EXPECT_EQ(env["ROLE_NAME"], "default");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "3");
  EXPECT_EQ(env["MASTER_ADDR"], "10.1.2.3");
  EXPECT_EQ(env["MASTER_PORT"], "41234");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "5");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "ddp-7");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,3");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(env["RINGMASTER_JOB_ID"], "ddp-7");
  EXPECT_EQ(env["RINGMASTER_COORDINATOR"], "127.0.0.1:7070");
  EXPECT_EQ(env["RINGMASTER_CHECKPOINT_DIR"], "/ckpt/ddp-7");
  EXPECT_EQ(env["FOO"], "bar");
}

TEST(RankEnvTest, LocalRankCountsRanksOnTheSameWorker) {
  const v1::Job job = TwoWorkerJob();
  auto env = BuildRankEnv(job, 1, {"c:1", "/ckpt"});
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "0");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
}

TEST(RankEnvTest, SpecKeepsItsOwnThreadCount) {
  v1::Job job = TwoWorkerJob();
  (*job.mutable_spec()->mutable_env())["OMP_NUM_THREADS"] = "4";
  EXPECT_EQ(BuildRankEnv(job, 0, {"c:1", "/ckpt"})["OMP_NUM_THREADS"], "4");
}

TEST(RankEnvTest, TheSpecsCheckpointDirOverridesTheCoordinatorsAndIsCheckedForTheTrainer) {
  v1::Job job = TwoWorkerJob();
  job.mutable_spec()->add_command("train.py");
  EXPECT_EQ(BuildStartRank(job, 0, {"c:1", "/ckpt"}).checkpoint_dir(), "")
      << "a program that was not given a checkpoint_dir is not held to one";
  job.mutable_spec()->set_checkpoint_dir("/shared/ckpt");
  v1::StartRank start = BuildStartRank(job, 1, {"c:1", "/ckpt"});
  EXPECT_EQ(start.env().at("RINGMASTER_CHECKPOINT_DIR"), "/shared/ckpt/ddp-7");
  EXPECT_EQ(start.checkpoint_dir(), "/shared/ckpt");

  job.mutable_spec()->clear_command();
  job.mutable_spec()->clear_checkpoint_dir();
  job.mutable_spec()->mutable_trainer()->set_epochs(1);
  start = BuildStartRank(job, 0, {"c:1", "/ckpt"});
  EXPECT_EQ(start.env().at("RINGMASTER_CHECKPOINT_DIR"), "/ckpt/ddp-7");
  EXPECT_EQ(start.checkpoint_dir(), "/ckpt") << "the trainer always checkpoints";
}

TEST(RankEnvTest, PreflightIsTheTrainersOwnAndACommandsPrelude) {
  v1::Job job = TwoWorkerJob();
  EXPECT_FALSE(BuildStartRank(job, 0, {"c:1", "/ckpt"}).preflight_prelude());
  job.mutable_spec()->set_preflight(true);
  v1::StartRank command = BuildStartRank(job, 0, {"c:1", "/ckpt"});
  EXPECT_TRUE(command.preflight_prelude());
  EXPECT_EQ(command.env().count("RINGMASTER_PREFLIGHT"), 0u);

  job.mutable_spec()->clear_command();
  job.mutable_spec()->mutable_trainer()->set_epochs(1);
  v1::StartRank trainer = BuildStartRank(job, 0, {"c:1", "/ckpt"});
  EXPECT_FALSE(trainer.preflight_prelude());
  EXPECT_EQ(trainer.env().at("RINGMASTER_PREFLIGHT"), "1");
  job.mutable_spec()->set_preflight(false);
  EXPECT_EQ(BuildStartRank(job, 0, {"c:1", "/ckpt"}).env().count("RINGMASTER_PREFLIGHT"), 0u);
}

// Ranks get a snapshot segment of their worker's (commands for
// ringmaster.checkpoint) unless the trainer's spec turns snapshots off.
TEST(RankEnvTest, RanksAskForASnapshotSegment) {
  v1::Job job = TwoWorkerJob();
  EXPECT_TRUE(BuildStartRank(job, 0, {"c:1", "/ckpt"}).snapshot_segment());
  job.mutable_spec()->mutable_trainer()->set_epochs(1);
  EXPECT_TRUE(BuildStartRank(job, 0, {"c:1", "/ckpt"}).snapshot_segment());
  job.mutable_spec()->mutable_trainer()->set_snapshot_every_steps(10);
  EXPECT_TRUE(BuildStartRank(job, 0, {"c:1", "/ckpt"}).snapshot_segment());
  job.mutable_spec()->mutable_trainer()->set_snapshot_every_steps(0);
  EXPECT_FALSE(BuildStartRank(job, 0, {"c:1", "/ckpt"}).snapshot_segment());
}

// Each worker of the job sends its ranks' snapshots to the next worker on
// another host, with the job's replica credential.
TEST(RankEnvTest, SnapshotsGoToTheNextWorkerOnAnotherHost) {
  v1::Job job = TwoWorkerJob();
  job.mutable_spec()->mutable_trainer()->set_epochs(1);
  auto* extra = job.add_ranks();  // a third worker, on w-a's host
  extra->set_rank(3);
  extra->set_worker_id("w-c");
  const char* addresses[] = {"10.0.0.1:7071", "10.0.0.1:7071", "10.0.0.2:7071", "10.0.0.1:7072"};
  for (int r = 0; r < 4; ++r) job.mutable_ranks(r)->set_worker_address(addresses[r]);
  CredentialSigner signer("key");
  RankEnvContext context{"c:1", "/ckpt", &signer};
  const v1::StartRank first = BuildStartRank(job, 0, context);
  EXPECT_EQ(first.replica_to().worker_id(), "w-b");
  EXPECT_EQ(first.replica_to().address(), "10.0.0.2:7071");
  EXPECT_EQ(first.replica_credential(), signer.Replica("ddp-7"));
  EXPECT_EQ(BuildStartRank(job, 2, context).replica_to().worker_id(), "w-c");
  // w-c's next is w-a, on its own host: w-b then.
  EXPECT_EQ(BuildStartRank(job, 3, context).replica_to().worker_id(), "w-b");

  // One host: the next worker all the same.
  for (int r = 0; r < 4; ++r) job.mutable_ranks(r)->set_worker_address("127.0.0.1:1");
  EXPECT_EQ(BuildStartRank(job, 3, context).replica_to().worker_id(), "w-a");
  // One worker: no replicas.
  for (int r = 0; r < 4; ++r) job.mutable_ranks(r)->set_worker_id("w-a");
  EXPECT_FALSE(BuildStartRank(job, 0, context).has_replica_to());
}

}  // namespace
}  // namespace ringmaster
