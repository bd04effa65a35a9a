#include "trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/notification.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "trainer/checkpoint.h"
#include "trainer/test_world.h"
#include "trainer/trainer_testing.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

TEST(TrainerTest, TwoRanksWithBatchBEqualOneRankWithBatch2B) {
  const TrainTestSplit data = Data(512);  // 409 training rows
  TrainerContext stop;
  stop.stop_after_step = 20;
  v1::TrainerSpec one = SgdSpec(20, 2);  // 20 steps per epoch
  v1::TrainerSpec two = SgdSpec(10, 2);
  const std::vector<float> single = TrainWorld(one, data, 1, stop);
  const std::vector<float> pair = TrainWorld(two, data, 2, stop);
  ASSERT_EQ(single.size(), pair.size());
  const double diff = MaxRelativeDifference(pair, single);
  std::cout << "world 2 vs world 1 after 20 SGD steps: max relative difference " << diff
            << std::endl;
  EXPECT_LE(diff, 1e-5) << "world 2 drifted from world 1";
  // The comparison is not vacuous: training moved the weights.
  const std::vector<float> init = TrainWorld(one, data, 1, [] {
    TrainerContext c;
    c.stop_after_step = 0;
    return c;
  }());
  EXPECT_GT(MaxRelativeDifference(single, init), 1e-2);
}

// The same over two hosts of two ranks: gradients cross between hosts in
// the hierarchical all-reduce (shared memory within, rings between).
TEST(TrainerTest, FourRanksOnTwoHostsEqualOneRankWithBatch4B) {
  const TrainTestSplit data = Data(512);
  TrainerContext stop;
  stop.stop_after_step = 20;
  const std::vector<float> single = TrainWorld(SgdSpec(20, 2), data, 1, stop);
  const std::vector<float> four = TrainWorld(SgdSpec(5, 2), data, 4, stop, /*hosts=*/2);
  const double diff = MaxRelativeDifference(four, single);
  std::cout << "2 hosts x 2 ranks vs world 1 after 20 SGD steps: max relative difference " << diff
            << std::endl;
  EXPECT_LE(diff, 1e-5) << "2 hosts x 2 ranks drifted from world 1";
}

TEST(TrainerTest, AccumulationEqualsALargerBatch) {
  const TrainTestSplit data = Data(512);
  TrainerContext stop;
  stop.stop_after_step = 10;
  v1::TrainerSpec big = SgdSpec(40, 1);
  v1::TrainerSpec accumulated = SgdSpec(20, 1);
  accumulated.set_grad_accum_steps(2);
  const double diff =
      MaxRelativeDifference(TrainWorld(accumulated, data, 2, stop), TrainWorld(big, data, 2, stop));
  EXPECT_LE(diff, 1e-5);
}

TEST(TrainerTest, FirstBucketAllReduceStartsBeforeBackwardEnds) {
  const TrainTestSplit data = Data(2048);
  v1::TrainerSpec spec = SgdSpec(64, 1);
  spec.mutable_model()->clear_hidden();
  for (int w : {512, 512, 512}) spec.mutable_model()->add_hidden(w);
  spec.set_bucket_mb(0.5);
  std::vector<std::unique_ptr<EventLog>> logs;
  for (int r = 0; r < 2; ++r) {
    logs.push_back(std::make_unique<EventLog>());
    // A bucket launched during backward starts before backward ends, even
    // when its thread gets the CPU late; one launched after it never does.
    logs.back()->HoldAt("backward end", "bucket 0 allreduce start", absl::Seconds(5));
  }
  RunWorld(2, [&](int rank, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    context.events = logs[rank].get();
    context.stop_after_step = 1;
    ASSERT_OK(Train(spec, data, context));
  });
  for (const auto& log : logs) {
    const int start = log->IndexOf("bucket 0 allreduce start");
    const int backward_end = log->IndexOf("backward end");
    ASSERT_GE(start, 0);
    ASSERT_GE(backward_end, 0);
    std::string order;
    for (const EventLog::Event& e : log->events()) absl::StrAppend(&order, e.name, "; ");
    EXPECT_LT(start, backward_end)
        << "the first bucket must be on the wire while backward still runs: " << order;
    EXPECT_GE(log->IndexOf("bucket 2 ready"), 0) << "the model has several buckets";
  }
}

TEST(TrainerTest, InterruptedRunResumesToTheSameWeights) {
  const TrainTestSplit data = Data(512);  // 12 steps per epoch per rank at world 2
  const v1::TrainerSpec spec = AdamSpec();
  TrainerContext plain;
  plain.checkpoint_dir = testing::MakeTempDir("uninterrupted");
  const std::vector<float> uninterrupted = TrainWorld(spec, data, 2, plain);

  TrainerContext crash;
  crash.checkpoint_dir = testing::MakeTempDir("interrupted");
  crash.stop_after_step = 17;  // mid-epoch 2; the newest checkpoint is step 14
  TrainWorld(spec, data, 2, crash);
  ASSERT_TRUE(fs::exists(crash.checkpoint_dir + "/step-14"));
  TrainerContext resume;
  resume.checkpoint_dir = crash.checkpoint_dir;
  const std::vector<float> resumed = TrainWorld(spec, data, 2, resume);
  EXPECT_EQ(resumed, uninterrupted)
      << "max relative difference " << MaxRelativeDifference(resumed, uninterrupted);
}

TEST(TrainerTest, CorruptNewestCheckpointFallsBackToThePrevious) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = AdamSpec();
  TrainerContext plain;
  plain.checkpoint_dir = testing::MakeTempDir("reference");
  const std::vector<float> reference = TrainWorld(spec, data, 2, plain);

  TrainerContext crash;
  crash.checkpoint_dir = testing::MakeTempDir("corrupt");
  crash.stop_after_step = 22;  // checkpoints at 7, 14, 21
  TrainWorld(spec, data, 2, crash);
  fs::resize_file(crash.checkpoint_dir + "/step-21/state.bin", 100);
  std::vector<std::string> lines;
  TrainerContext resume;
  resume.checkpoint_dir = crash.checkpoint_dir;
  resume.log = [&](const std::string& line) { lines.push_back(line); };
  const std::vector<float> resumed = TrainWorld(spec, data, 2, resume);
  EXPECT_EQ(resumed, reference);
  bool reported = false, fell_back = false;
  for (const auto& line : lines) {
    reported |= line.find("checkpoint skipped") != std::string::npos &&
                line.find("step-21") != std::string::npos;
    fell_back |=
        line.find("resuming from " + crash.checkpoint_dir + "/step-14") != std::string::npos;
  }
  EXPECT_TRUE(reported) << "the corrupt checkpoint must be reported";
  EXPECT_TRUE(fell_back) << "training must resume from step-14";
}

// The checkpoints of directory `dir`, by step.
std::vector<int64_t> CheckpointSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  if (!fs::exists(dir)) return steps;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename();
    int64_t step = 0;
    if (absl::StartsWith(name, "step-") && absl::SimpleAtoi(name.substr(5), &step)) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// checkpoint_every_s: a clock that reads 10 s a step makes a checkpoint
// every 40 s (4 steps) of 35; 0 makes none.
TEST(TrainerTest, CheckpointsOnATimeInterval) {
  const TrainTestSplit data = Data(512);
  v1::TrainerSpec spec = SgdSpec(16, 1);
  spec.set_checkpoint_every_s(35);
  std::atomic<int64_t> steps_done{0};
  TrainerContext timed;
  timed.checkpoint_dir = testing::MakeTempDir("timed");
  timed.steps_done = &steps_done;
  timed.now = [&steps_done] {
    return std::chrono::steady_clock::time_point() + std::chrono::seconds(10 * steps_done.load());
  };
  TrainWorld(spec, data, 1, timed);
  const std::vector<int64_t> steps = CheckpointSteps(timed.checkpoint_dir);
  ASSERT_FALSE(steps.empty()) << "no checkpoint was made";
  for (int64_t step : steps) EXPECT_EQ(step % 4, 0) << "step " << step;
  EXPECT_GE(steps.back(), 20) << "25 steps: the last checkpoints are at 20 and 24";

  spec.set_checkpoint_every_s(0);
  TrainerContext untimed = timed;
  untimed.checkpoint_dir = testing::MakeTempDir("untimed");
  steps_done = 0;
  TrainWorld(spec, data, 1, untimed);
  EXPECT_TRUE(CheckpointSteps(untimed.checkpoint_dir).empty());
}

// A job that lost a rank resumes with fewer, or regains one and resumes
// with more: the position is in rows of the epoch, so the new world sees
// the rest of the data once and re-derives its steps and LR.
TEST(TrainerTest, ResumesAtAnotherWorldSizeWithTheRestOfTheEpoch) {
  const TrainTestSplit data = Data(512);  // 409 training rows
  v1::TrainerSpec spec = SgdSpec(10, 2);
  spec.set_checkpoint_every_steps(1);
  TrainerContext crash;
  crash.checkpoint_dir = testing::MakeTempDir("resize");
  crash.stop_after_step = 5;  // world 2: 20 rows a step, so 100 rows of epoch 0 seen
  TrainWorld(spec, data, 2, crash);

  std::vector<TrainResult> results(3);
  RunWorld(3, [&](int rank, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    context.checkpoint_dir = crash.checkpoint_dir;
    auto result = Train(spec, data, context);
    ASSERT_OK(result) << result.status();
    results[rank] = *std::move(result);
  });
  // World 3: (409 - 100) / 3 = 103 rows a rank, 10 steps to end epoch 0;
  // 409 / 3 = 136 rows a rank, 13 steps for epoch 1.
  EXPECT_EQ(results[0].resumed_from_step, 5);
  EXPECT_EQ(results[0].total_steps, 5 + 10 + 13);
  for (const TrainResult& r : results) {
    EXPECT_EQ(r.steps, r.total_steps);
    EXPECT_EQ(r.params, results[0].params);
  }
  EXPECT_GT(results[0].eval_accuracy, 0.5) << "4 balanced classes: chance is 0.25";
}

// Stopping (SIGTERM in the binary): rank 0 checkpoints after the step it is
// in and returns; the other rank's next collective fails instead of waiting
// out its timeout; a resume from that checkpoint continues the same run.
TEST(TrainerTest, StopRequestCheckpointsAtTheStepBoundaryAndEndsEveryRank) {
  const TrainTestSplit data = Data(512);
  v1::TrainerSpec spec = SgdSpec(10, 1);
  TrainerContext plain;
  plain.checkpoint_dir = testing::MakeTempDir("unstopped");
  const std::vector<float> unstopped = TrainWorld(spec, data, 2, plain);

  const std::string dir = testing::MakeTempDir("stopped");
  std::vector<absl::StatusOr<TrainResult>> results(2, absl::UnknownError("not run"));
  RunWorld(2, [&](int rank, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    context.checkpoint_dir = dir;
    int asked = 0;
    context.stop_requested = [&asked] { return ++asked == 4; };
    results[rank] = Train(spec, data, context);
  });
  ASSERT_OK(results[0]) << results[0].status();
  EXPECT_TRUE(results[0]->stopped);
  EXPECT_EQ(results[0]->steps, 4);
  EXPECT_TRUE(fs::exists(dir + "/step-4"));
  EXPECT_THAT(results[1], IsError()) << "rank 1 ran on without rank 0";

  TrainerContext resume;
  resume.checkpoint_dir = dir;
  EXPECT_EQ(TrainWorld(spec, data, 2, resume), unstopped);
}

// A rank that is slow between its collectives (here: 20 ms in its progress
// report, as a throttled CPU would be) shows it in its compute time; its
// peer spends the same steps waiting in the all-reduce, which its compute
// time leaves out.
TEST(TrainerTest, ComputeTimeLeavesOutTheWaitForASlowPeer) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = SgdSpec(16, 1);
  std::vector<v1::Progress> last(2);
  RunWorld(2, [&](int rank, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    context.progress_interval_seconds = 0;  // a report every step
    context.on_progress = [&, rank](const v1::Progress& p) {
      last[rank] = p;
      if (rank == 1) absl::SleepFor(absl::Milliseconds(20));
    };
    auto result = Train(spec, data, context);
    ASSERT_OK(result) << result.status();
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(last[rank].compute_steps(), last[rank].step()) << rank;
  }
  const double slow = last[1].compute_seconds() / last[1].compute_steps();
  const double waiting = last[0].compute_seconds() / last[0].compute_steps();
  EXPECT_GT(slow, 0.018) << "the slow rank's 20 ms a step are its own";
  EXPECT_LT(waiting, slow / 3) << "rank 0 waited for rank 1 in the all-reduce";
}

// A rank held up between steps: its peer's flight record says it waits in
// the next step's all-reduce, with the bucket in flight; the held rank's
// says where it is.
TEST(TrainerTest, FlightRecordsSayWhereEachRankIs) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = SgdSpec(16, 1);
  const std::string dir = testing::MakeTempDir("flight");
  std::vector<std::unique_ptr<FlightRecorder>> recorders;
  for (int rank = 0; rank < 2; ++rank) {
    auto recorder = FlightRecorder::Open(absl::StrCat(dir, "/rank-", rank));
    ASSERT_OK(recorder);
    recorders.push_back(*std::move(recorder));
  }
  absl::Notification waiting;
  std::optional<FlightState> peer;
  RunWorld(2, [&](int rank, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    context.flight = recorders[rank].get();
    context.progress_interval_seconds = 0;
    context.on_progress = [&, rank](const v1::Progress& p) {
      if (rank != 1 || p.step() != 3 || waiting.HasBeenNotified()) return;
      // Held after step 3, until rank 0 is in step 4's all-reduce.
      for (int i = 0; i < 500 && !peer; ++i) {
        absl::StatusOr<FlightState> s = ReadFlightRecord(dir + "/rank-0");
        // The phase is set before the comm thread takes the bucket: wait for both.
        if (s.ok() && s->phase == TrainPhase::kAllReduce && s->step == 4 && s->bucket >= 0) {
          peer = *s;
        }
        absl::SleepFor(absl::Milliseconds(10));
      }
      absl::StatusOr<FlightState> own = ReadFlightRecord(dir + "/rank-1");
      EXPECT_OK(own);
      if (own.ok()) {
        EXPECT_EQ(own->step, 4);
        EXPECT_EQ(own->phase, TrainPhase::kOptimizer) << PhaseName(own->phase);
      }
      waiting.Notify();
    };
    ASSERT_OK(Train(spec, data, context).status());
  });
  ASSERT_TRUE(peer.has_value())
      << "rank 0 never waited in step 4's all-reduce with a bucket in flight";
  EXPECT_LT(peer->bucket, 1) << "one bucket of 16 units";
  absl::StatusOr<FlightState> done = ReadFlightRecord(dir + "/rank-0");
  ASSERT_OK(done);
  EXPECT_EQ(done->phase, TrainPhase::kDone);
}

TEST(TrainerTest, LearnsDigits) {
  auto all = LoadCsv(DigitsPath(), -1);
  if (!all.ok()) GTEST_SKIP() << "python3-sklearn not installed: " << all.status();
  const TrainTestSplit data = SplitAndStandardize(*all, 0.2, 1);
  v1::TrainerSpec spec;
  // The demo's configuration.
  spec.mutable_model()->add_hidden(256);
  spec.mutable_model()->add_hidden(256);
  spec.set_batch_size(64);
  spec.set_epochs(20);
  spec.set_warmup_steps(20);
  spec.mutable_optimizer()->set_type("adamw");
  spec.mutable_optimizer()->set_lr(0.001);
  spec.set_lr_scaling("linear");
  spec.set_bucket_mb(25);
  spec.set_seed(1);
  double accuracy = 0;
  RunWorld(2, [&](int rank, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    auto result = Train(spec, data, context);
    ASSERT_OK(result) << result.status();
    if (rank == 0) accuracy = result->eval_accuracy;
  });
  EXPECT_GE(accuracy, 0.95);
}

// Clipping needs the global norm, so its step waits for every bucket; the
// result must still be the same at any world size.
TEST(TrainerTest, ClippedTwoRanksEqualOneRankWithDoubleBatch) {
  const TrainTestSplit data = Data(512);
  TrainerContext stop;
  stop.stop_after_step = 15;
  v1::TrainerSpec one = SgdSpec(20, 2);
  v1::TrainerSpec two = SgdSpec(10, 2);
  one.set_grad_clip_norm(0.5);
  two.set_grad_clip_norm(0.5);
  const double diff =
      MaxRelativeDifference(TrainWorld(two, data, 2, stop), TrainWorld(one, data, 1, stop));
  EXPECT_LE(diff, 1e-5);
  v1::TrainerSpec unclipped = SgdSpec(20, 2);
  EXPECT_GT(
      MaxRelativeDifference(TrainWorld(one, data, 1, stop), TrainWorld(unclipped, data, 1, stop)),
      1e-3)
      << "clipping at 0.5 must change the trajectory, or this test proves nothing";
}

}  // namespace
}  // namespace ringmaster
