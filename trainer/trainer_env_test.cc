#include "trainer/trainer_env.h"
#include "testing/status_matchers.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

absl::StatusOr<TrainerEnv> Read(std::map<std::string, std::string> vars) {
  return ReadTrainerEnv([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(TrainerEnvTest, ReadsWhatTheWorkerSets) {
  absl::StatusOr<TrainerEnv> env = Read({{"RANK", "2"},
                                         {"WORLD_SIZE", "3"},
                                         {"TORCHELASTIC_RESTART_COUNT", "4"},
                                         {"RINGMASTER_JOB_ID", "j7"},
                                         {"RINGMASTER_CHECKPOINT_DIR", "/ck"},
                                         {"RINGMASTER_COLLECTIVE_TIMEOUT_S", "630"},
                                         {"CUDA_VISIBLE_DEVICES", ""},
                                         {"RINGMASTER_PREFLIGHT", "1"},
                                         {"GROUP_RANK", "1"},
                                         {"LOCAL_RANK", "0"}});
  ASSERT_OK(env) << env.status();
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 3);
  EXPECT_EQ(env->attempt, 4);
  EXPECT_EQ(env->job_id, "j7");
  EXPECT_EQ(env->checkpoint_dir, "/ck");
  EXPECT_EQ(env->collective_timeout, absl::Seconds(630));
  EXPECT_EQ(env->stop_grace, absl::Seconds(5));
  EXPECT_TRUE(env->visible_gpus.empty()) << "an empty list means the CPU";
  EXPECT_EQ(env->host, "127.0.0.1");
  EXPECT_TRUE(env->preflight);
  EXPECT_EQ(env->group_rank, 1);
  EXPECT_EQ(env->local_rank, 0);
}

TEST(TrainerEnvTest, AStandaloneRunIsRankZeroOfOne) {
  absl::StatusOr<TrainerEnv> env = Read({});
  ASSERT_OK(env) << env.status();
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->collective_timeout, absl::Seconds(120));
  EXPECT_FALSE(env->preflight);
}

TEST(TrainerEnvTest, MalformedValuesAreNamed) {
  EXPECT_EQ(Read({{"RANK", "one"}}).status().message(), "RANK=\"one\" is not an integer >= 0");
  EXPECT_EQ(Read({{"WORLD_SIZE", "0"}}).status().message(),
            "WORLD_SIZE=\"0\" is not an integer >= 1");
  EXPECT_EQ(Read({{"RINGMASTER_COLLECTIVE_TIMEOUT_S", "-3"}}).status().message(),
            "RINGMASTER_COLLECTIVE_TIMEOUT_S=\"-3\" is not a number of seconds > 0");
  EXPECT_EQ(Read({{"RINGMASTER_STOP_GRACE_S", "nan"}}).status().message(),
            "RINGMASTER_STOP_GRACE_S=\"nan\" is not a number of seconds > 0");
  EXPECT_EQ(Read({{"RINGMASTER_PREFLIGHT", "yes"}}).status().message(),
            "RINGMASTER_PREFLIGHT=\"yes\" is not 1 or 0");
  EXPECT_EQ(Read({{"RANK", "3"}, {"WORLD_SIZE", "3"}}).status().message(),
            "RANK=3 is not below WORLD_SIZE=3");
}

}  // namespace
}  // namespace ringmaster
