#include "trainer/checkpoint.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

TrainingState State(int64_t step) {
  TrainingState s;
  s.step = step;
  s.epoch = 2;
  s.epoch_rows = 7;
  s.world_size = 3;
  s.seed = 42;
  s.optimizer_steps = step;
  s.params = {1.5f, -2.0f, static_cast<float>(step)};
  s.optimizer_state = {0.25f, 0.5f};
  return s;
}

TEST(CheckpointTest, RoundTripsAndKeepsTheNewest) {
  const std::string dir = testing::MakeTempDir("ckpt");
  for (int64_t step : {10, 20, 30, 40}) ASSERT_OK(WriteCheckpoint(dir, State(step), 3));
  EXPECT_FALSE(fs::exists(dir + "/step-10")) << "only the newest 3 are kept";
  EXPECT_TRUE(fs::exists(dir + "/step-20/state.bin"));
  auto loaded = LoadLatestCheckpoint(dir);
  ASSERT_OK(loaded) << loaded.status();
  EXPECT_EQ(loaded->path, dir + "/step-40");
  EXPECT_EQ(loaded->state.step, 40);
  EXPECT_EQ(loaded->state.epoch, 2);
  EXPECT_EQ(loaded->state.epoch_rows, 7);
  EXPECT_EQ(loaded->state.world_size, 3);
  EXPECT_EQ(loaded->state.seed, 42u);
  EXPECT_EQ(loaded->state.params, State(40).params);
  EXPECT_EQ(loaded->state.optimizer_state, State(40).optimizer_state);
  EXPECT_TRUE(loaded->skipped.empty());
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos)
        << "no temporary directory is left";
  }
}

TEST(CheckpointTest, CorruptOrTruncatedNewestFallsBackToThePrevious) {
  const std::string dir = testing::MakeTempDir("ckpt-corrupt");
  ASSERT_OK(WriteCheckpoint(dir, State(10)));
  ASSERT_OK(WriteCheckpoint(dir, State(20)));
  ASSERT_OK(WriteCheckpoint(dir, State(30)));
  {  // flip a byte in step-30
    std::fstream f(dir + "/step-30/state.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  fs::resize_file(dir + "/step-20/state.bin", 30);  // truncate step-20
  auto loaded = LoadLatestCheckpoint(dir);
  ASSERT_OK(loaded) << loaded.status();
  EXPECT_EQ(loaded->state.step, 10);
  ASSERT_EQ(loaded->skipped.size(), 2u);
  EXPECT_NE(loaded->skipped[0].find("step-30/state.bin: checksum mismatch"), std::string::npos)
      << loaded->skipped[0];
  EXPECT_NE(loaded->skipped[1].find("step-20"), std::string::npos) << loaded->skipped[1];
}

TEST(CheckpointTest, NoneReadableIsNotFound) {
  const std::string dir = testing::MakeTempDir("ckpt-none");
  EXPECT_THAT(LoadLatestCheckpoint(dir).status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(WriteCheckpoint(dir, State(5)));
  fs::resize_file(dir + "/step-5/state.bin", 0);
  auto loaded = LoadLatestCheckpoint(dir);
  EXPECT_THAT(loaded.status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_NE(loaded.status().message().find("skipped"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster
