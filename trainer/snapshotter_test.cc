#include "trainer/snapshotter.h"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

// An MLP 6 -> 16 -> 3 with AdamW: two planes of optimizer state.
std::unique_ptr<ModelRunner> Runner() {
  v1::TrainerSpec spec;
  spec.set_seed(5);
  spec.mutable_optimizer()->set_type("adamw");
  spec.mutable_optimizer()->set_lr(0.01);
  absl::StatusOr<std::unique_ptr<ModelRunner>> runner = MakeCpuRunner(spec, {6, 16, 3});
  EXPECT_OK(runner);
  return *std::move(runner);
}

// One training step on made-up rows (different at each step), so that
// parameters and moments change. With `snapshots` taking the step bucket
// by bucket, its update goes through them as the reducer's does: the last
// bucket first.
void Step(ModelRunner& runner, int64_t step, Snapshotter* snapshots = nullptr) {
  std::vector<float> x(4 * 6);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.1f * static_cast<float>((i + step) % 7) - 0.3f;
  }
  std::vector<int32_t> y = {0, 1, 2, 1};
  ASSERT_OK(runner.ForwardBackward(x.data(), y.data(), 4, 1.0f, false, nullptr).status());
  runner.BeginStep(0.01f, 1.0f);
  if (snapshots != nullptr && snapshots->copying_buckets()) {
    const size_t half = runner.size() / 2;
    ASSERT_OK(snapshots->Update(runner, half, runner.size() - half));
    ASSERT_OK(snapshots->Update(runner, 0, half));
  } else {
    ASSERT_OK(runner.UpdateRange(0, runner.size()));
  }
  ASSERT_OK(runner.AfterStep());
}

struct Segment {
  UniqueFd fd;
  std::unique_ptr<SnapshotSegment> rank_view;  // the snapshotter writes through it
  std::unique_ptr<SnapshotSegment> worker_view;
};

Segment MakeSegment(uint64_t capacity) {
  Segment s;
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(capacity);
  EXPECT_OK(fd);
  s.fd = *std::move(fd);
  s.rank_view = *SnapshotSegment::Map(s.fd.get(), 0, "the rank's segment");
  s.worker_view = *SnapshotSegment::Map(s.fd.get(), capacity, "the worker's view");
  return s;
}

TrainingState Position(const ModelRunner& runner) {
  TrainingState position;
  position.epoch = 1;
  position.epoch_rows = 96;
  position.world_size = 2;
  position.seed = 5;
  position.optimizer_steps = runner.optimizer_steps();
  return position;
}

void ExpectHoldsRunnersState(const LoadedCheckpoint& loaded, ModelRunner& runner, int64_t step) {
  std::vector<float> params, state;
  ASSERT_OK(runner.ReadState(&params, &state));
  EXPECT_EQ(loaded.path, "memory");
  EXPECT_EQ(loaded.state.step, step);
  EXPECT_EQ(loaded.state.epoch, 1);
  EXPECT_EQ(loaded.state.epoch_rows, 96);
  EXPECT_EQ(loaded.state.world_size, 2);
  EXPECT_EQ(loaded.state.optimizer_steps, runner.optimizer_steps());
  EXPECT_EQ(loaded.state.params, params);
  EXPECT_EQ(loaded.state.optimizer_state, state);
}

class SnapshotterTest : public ::testing::TestWithParam<SnapshotCopy> {};

TEST_P(SnapshotterTest, EachStepsStateReadsBackExactly) {
  std::unique_ptr<ModelRunner> runner = Runner();
  Segment segment = MakeSegment(1 << 20);
  SnapshotterOptions options;
  options.copy = GetParam();
  options.attempt = 4;
  options.rank = 1;
  options.world_size = 2;
  absl::StatusOr<std::unique_ptr<Snapshotter>> snapshots = Snapshotter::Make(
      segment.rank_view.get(), runner->size(), runner->optimizer_state_size(), options);
  ASSERT_OK(snapshots);
  for (int64_t step = 1; step <= 3; ++step) {
    ASSERT_TRUE((*snapshots)->Begin(step));
    EXPECT_EQ((*snapshots)->copying_buckets(), GetParam() == SnapshotCopy::kBucketed);
    Step(*runner, step, snapshots->get());
    ASSERT_OK((*snapshots)->End(*runner, Position(*runner)));
    (*snapshots)->Drain();
  }
  const std::vector<SnapshotInfo> held = segment.worker_view->Committed();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].step, 3);
  EXPECT_EQ(held[1].step, 2);
  EXPECT_EQ(held[0].attempt, 4);
  EXPECT_EQ(held[0].rank, 1);
  EXPECT_EQ(held[0].format, SnapshotFormat::kTrainer);
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestSnapshot(*segment.worker_view);
  ASSERT_OK(loaded);
  ExpectHoldsRunnersState(*loaded, *runner, 3);
  const SnapshotStats stats = (*snapshots)->stats();
  EXPECT_EQ(stats.committed, 3);
  EXPECT_EQ(stats.newest_step, 3);
  EXPECT_EQ(stats.bytes, static_cast<int64_t>(held[0].bytes));
}

INSTANTIATE_TEST_SUITE_P(Copies, SnapshotterTest,
                         ::testing::Values(SnapshotCopy::kStaged, SnapshotCopy::kBucketed));

// Step 1 taken into `segment`, its update through the snapshotter when
// `bucketed`; the snapshot as the worker reads it back.
absl::StatusOr<LoadedCheckpoint> TakeFirstStep(ModelRunner& runner, Segment& segment,
                                               bool bucketed) {
  auto snapshots =
      Snapshotter::Make(segment.rank_view.get(), runner.size(), runner.optimizer_state_size(), {});
  if (!snapshots.ok()) return snapshots.status();
  EXPECT_TRUE((*snapshots)->Begin(1));
  Step(runner, 1, bucketed ? snapshots->get() : nullptr);
  if (absl::Status s = (*snapshots)->End(runner, Position(runner)); !s.ok()) return s;
  (*snapshots)->Drain();
  return LoadNewestSnapshot(*segment.worker_view);
}

TEST(SnapshotterTest, AStepUpdatedWithoutItIsCopiedWholeAtTheEnd) {
  // The update path that clips updates every bucket at once, in place.
  std::unique_ptr<ModelRunner> runner = Runner();
  Segment segment = MakeSegment(1 << 20);
  absl::StatusOr<LoadedCheckpoint> loaded = TakeFirstStep(*runner, segment, false);
  ASSERT_OK(loaded);
  ExpectHoldsRunnersState(*loaded, *runner, 1);
}

TEST(SnapshotterTest, TrainingOnTheSnapshotsGivesExactlyTheParametersOfTrainingWithout) {
  // Every other step taken bucket by bucket: the runner trains on the
  // slot after a taken step, and the step after writes elsewhere, leaving
  // the snapshot as it was. Both runners end bit for bit the same.
  std::unique_ptr<ModelRunner> plain = Runner();
  std::unique_ptr<ModelRunner> runner = Runner();
  ASSERT_TRUE(runner->UpdatesInto());
  Segment segment = MakeSegment(1 << 20);
  SnapshotterOptions options;
  options.every_steps = 2;
  auto snapshots = Snapshotter::Make(segment.rank_view.get(), runner->size(),
                                     runner->optimizer_state_size(), options);
  ASSERT_OK(snapshots);
  std::vector<float> taken_params, taken_state;
  for (int64_t step = 1; step <= 7; ++step) {
    Step(*plain, step);
    const bool taken = (*snapshots)->Begin(step);
    Step(*runner, step, snapshots->get());
    ASSERT_OK((*snapshots)->End(*runner, Position(*runner)));
    (*snapshots)->Drain();
    if (taken) {
      ASSERT_OK(runner->ReadState(&taken_params, &taken_state));
      // The runner now trains on the slot it wrote: a byte changed
      // through its parameters is one the snapshot's checksum no longer
      // matches.
      EXPECT_EQ(segment.worker_view->Committed()[0].step, step);
      const float saved = runner->params()[0];
      runner->params()[0] = saved + 1;
      EXPECT_THAT(segment.worker_view->Read(segment.worker_view->Committed()[0]),
                  StatusIs(absl::StatusCode::kDataLoss));
      runner->params()[0] = saved;
    }
    // Whatever the step since the first taken, the newest snapshot is
    // whole and holds its step's state.
    if (step < 2) continue;
    absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestSnapshot(*segment.worker_view);
    ASSERT_OK(loaded);
    EXPECT_EQ(loaded->state.step, step - step % 2);
    EXPECT_EQ(loaded->state.params, taken_params);
    EXPECT_EQ(loaded->state.optimizer_state, taken_state);
  }
  std::vector<float> params, state, plain_params, plain_state;
  ASSERT_OK(runner->ReadState(&params, &state));
  ASSERT_OK(plain->ReadState(&plain_params, &plain_state));
  EXPECT_EQ(params, plain_params);
  EXPECT_EQ(state, plain_state);
  EXPECT_NE(params, taken_params);  // step 7 moved on from step 6's
}

TEST(SnapshotterTest, ARestoredStateIsTheRunnersOwnAgain) {
  std::unique_ptr<ModelRunner> runner = Runner();
  Segment segment = MakeSegment(1 << 20);
  absl::StatusOr<LoadedCheckpoint> loaded = TakeFirstStep(*runner, segment, true);
  ASSERT_OK(loaded);
  // A write of the state (a resume) leaves the slot alone.
  std::vector<float> zeros(runner->size(), 0.0f);
  ASSERT_OK(runner->WriteState(zeros, nullptr));
  std::vector<float> params, state;
  ASSERT_OK(runner->ReadState(&params, &state));
  EXPECT_EQ(params, zeros);
  EXPECT_EQ(state, loaded->state.optimizer_state);  // kept, from the slot
  absl::StatusOr<LoadedCheckpoint> again = LoadNewestSnapshot(*segment.worker_view);
  ASSERT_OK(again);
  EXPECT_EQ(again->state.params, loaded->state.params);
}

TEST(SnapshotterTest, OnlyEveryNthStepIsTaken) {
  std::unique_ptr<ModelRunner> runner = Runner();
  Segment segment = MakeSegment(1 << 20);
  SnapshotterOptions options;
  options.every_steps = 3;
  auto snapshots = Snapshotter::Make(segment.rank_view.get(), runner->size(),
                                     runner->optimizer_state_size(), options);
  ASSERT_OK(snapshots);
  EXPECT_FALSE((*snapshots)->Begin(1));
  EXPECT_FALSE((*snapshots)->Begin(2));
  EXPECT_TRUE((*snapshots)->Begin(3));
  ASSERT_OK((*snapshots)->End(*runner, Position(*runner)));
  options.every_steps = 0;  // off
  Segment off_segment = MakeSegment(1 << 20);
  auto off = Snapshotter::Make(off_segment.rank_view.get(), runner->size(),
                               runner->optimizer_state_size(), options);
  ASSERT_OK(off);
  EXPECT_FALSE((*off)->Begin(1));
}

TEST(SnapshotterTest, AStateLargerThanTheSlotsIsRefusedNamingBothSizes) {
  std::unique_ptr<ModelRunner> runner = Runner();
  Segment segment = MakeSegment(16 << 10);
  EXPECT_THAT(Snapshotter::Make(segment.rank_view.get(), 1 << 20, 2 << 20, {}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "a snapshot of this model and its optimizer is 12.0 MiB; the worker's "
                       "segment holds two of 0.0 MiB (its --snapshot-memory-limit)"));
}

TEST(SnapshotterTest, ACorruptNewestSnapshotFallsBackToTheOneBefore) {
  std::unique_ptr<ModelRunner> runner = Runner();
  Segment segment = MakeSegment(1 << 20);
  auto snapshots = Snapshotter::Make(segment.rank_view.get(), runner->size(),
                                     runner->optimizer_state_size(), {});
  ASSERT_OK(snapshots);
  for (int64_t step = 1; step <= 2; ++step) {
    ASSERT_TRUE((*snapshots)->Begin(step));
    Step(*runner, step, snapshots->get());
    ASSERT_OK((*snapshots)->End(*runner, Position(*runner)));
    (*snapshots)->Drain();
  }
  const SnapshotInfo newest = segment.worker_view->Committed()[0];
  char* base = static_cast<char*>(
      mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, segment.fd.get(), 0));
  ASSERT_NE(base, MAP_FAILED);
  base[kSnapshotHeaderBytes + newest.slot * segment.worker_view->slot_bytes() + 100] ^= 0x10;
  munmap(base, 1 << 20);
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestSnapshot(*segment.worker_view);
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->state.step, 1);
  ASSERT_EQ(loaded->skipped.size(), 1u);
  EXPECT_EQ(loaded->skipped[0], "the worker's view: the snapshot of step 2 fails its checksum");
}

TEST(SnapshotterTest, AnEmptySegmentHasNoSnapshot) {
  Segment segment = MakeSegment(1 << 20);
  EXPECT_THAT(LoadNewestSnapshot(*segment.worker_view),
              StatusIs(absl::StatusCode::kNotFound, "no readable snapshot in the worker's memory"));
}

}  // namespace
}  // namespace ringmaster
