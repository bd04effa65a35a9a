#include "trainer/checkpoint_writer.h"

#include <fstream>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

std::unique_ptr<ModelRunner> Runner() {
  v1::TrainerSpec spec;
  spec.set_seed(3);
  spec.mutable_optimizer()->set_type("adamw");
  spec.mutable_optimizer()->set_lr(0.01);
  absl::StatusOr<std::unique_ptr<ModelRunner>> runner = MakeCpuRunner(spec, {5, 7, 2});
  EXPECT_OK(runner);
  return *std::move(runner);
}

TrainingState Position(int64_t step) {
  TrainingState position;
  position.step = step;
  position.epoch = 3;
  position.epoch_rows = 40;
  position.world_size = 4;
  position.seed = 3;
  position.optimizer_steps = step;
  return position;
}

TEST(CheckpointWriterTest, WritesTheStagedStateWholeInTheBackground) {
  const std::string dir = testing::MakeTempDir("writer");
  std::unique_ptr<ModelRunner> runner = Runner();
  CheckpointWriter writer(dir, 2);
  for (int64_t step : {10, 20, 30}) {
    ASSERT_OK(writer.Stage(*runner, Position(step)));
    ASSERT_OK(writer.Flush());
  }
  absl::StatusOr<LoadedCheckpoint> loaded = LoadLatestCheckpoint(dir);
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->path, dir + "/step-30");
  EXPECT_EQ(loaded->state.epoch, 3);
  EXPECT_EQ(loaded->state.epoch_rows, 40);
  EXPECT_EQ(loaded->state.world_size, 4);
  std::vector<float> params, state;
  ASSERT_OK(runner->ReadState(&params, &state));
  EXPECT_EQ(loaded->state.params, params);
  EXPECT_EQ(loaded->state.optimizer_state, state);
  EXPECT_EQ(NewestCheckpointStep(dir), 30);
  EXPECT_FALSE(std::ifstream(dir + "/step-10/state.bin")) << "only the newest 2 are kept";
  const CheckpointWriterStats stats = writer.stats();
  EXPECT_EQ(stats.written, 3);
  EXPECT_EQ(stats.newest_step, 30);
  // The staged file is the one EncodeCheckpoint makes.
  TrainingState whole = Position(30);
  whole.params = params;
  whole.optimizer_state = state;
  std::ifstream in(dir + "/step-30/state.bin", std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), EncodeCheckpoint(whole));
}

TEST(CheckpointWriterTest, AFailedWriteIsTheNextCallsError) {
  const std::string file = testing::MakeTempDir("writer-error") + "/not-a-directory";
  std::ofstream(file) << "x";
  std::unique_ptr<ModelRunner> runner = Runner();
  CheckpointWriter writer(file, 3);
  ASSERT_OK(writer.Stage(*runner, Position(1)));
  absl::Status flushed = writer.Flush();
  EXPECT_FALSE(flushed.ok());
  EXPECT_NE(flushed.message().find(file), std::string::npos) << flushed;
  EXPECT_EQ(writer.stats().written, 0);
  // Said once: the next write is tried afresh.
  EXPECT_OK(writer.Flush());
}

}  // namespace
}  // namespace ringmaster
