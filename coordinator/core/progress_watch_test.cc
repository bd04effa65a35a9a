#include "coordinator/core/progress_watch.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);
absl::Time At(double seconds) { return kStart + absl::Seconds(seconds); }

TEST(ProgressWatchTest, NotStartedRanksAreListed) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kTrainer, 3, kStart);
  watch.Started(1);
  EXPECT_EQ(watch.NotStarted(), (std::vector<int>{0, 2}));
  EXPECT_EQ(watch.began(), kStart);
}

TEST(ProgressWatchTest, TrainerHangsWhenNoStepAdvancesAndTheStoppedRankIsNamed) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kTrainer, 2, kStart);
  for (int s = 0; s <= 10; ++s) {
    watch.Step(0, s, At(s));
    watch.Step(1, s, At(s + 0.2));
    watch.Activity(0, 0, s + 1, At(s));
    watch.Activity(1, 0, s + 1, At(s + 0.2));
  }
  EXPECT_TRUE(watch.progressed());
  // Rank 1 is stopped after step 10; rank 0 waits in the all-reduce and
  // keeps reporting the same step.
  for (int t = 11; t < 40; ++t) watch.Activity(0, 0, t + 100, At(t));
  EXPECT_FALSE(watch.Hung(absl::Seconds(30), At(40.1)));
  std::optional<ProgressWatch::Hang> hang = watch.Hung(absl::Seconds(30), At(40.2));
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->rank, 1) << "rank 0 still reports; rank 1 went silent";
  EXPECT_EQ(hang->last_step, 10);
  EXPECT_EQ(hang->idle, absl::Seconds(30));
}

TEST(ProgressWatchTest, ReportsWithoutNewStepsAreNotProgress) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kTrainer, 1, kStart);
  watch.Step(0, 5, At(1));  // where a resumed rank starts
  EXPECT_FALSE(watch.progressed());
  for (int t = 2; t < 20; ++t) watch.Activity(0, t * 10, t, At(t));
  ASSERT_TRUE(watch.Hung(absl::Seconds(10), At(10)));
  EXPECT_EQ(watch.Hung(absl::Seconds(10), At(10))->last_step, 5);
}

TEST(ProgressWatchTest, CommandProgressesByOutputOfAnyRank) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kCommand, 2, kStart);
  // Only rank 0 writes, as DDP scripts often do; rank 1 stays quiet.
  for (int t = 1; t <= 50; ++t) watch.Activity(0, t * 100, 0, At(t));
  EXPECT_FALSE(watch.Hung(absl::Seconds(10), At(55)));
  std::optional<ProgressWatch::Hang> hang = watch.Hung(absl::Seconds(10), At(60));
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->rank, 1) << "silent since the start";
  EXPECT_EQ(hang->last_step, -1);
}

TEST(ProgressWatchTest, OffWhenTimeoutIsZero) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kCommand, 1, kStart);
  EXPECT_FALSE(watch.Hung(absl::ZeroDuration(), At(1e6)));
}

TEST(ProgressWatchTest, TiesGoToTheLowestStepThenTheLowestRank) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kTrainer, 3, kStart);
  watch.Step(0, 7, At(1));
  watch.Step(1, 3, At(1));
  watch.Step(2, 3, At(1));
  std::optional<ProgressWatch::Hang> hang = watch.Hung(absl::Seconds(5), At(6));
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->rank, 1);
  EXPECT_EQ(hang->last_step, 3);
}

// A group formed again after a failure, its steps back at a snapshot's: the
// time it took to form is no hang, and steps count again from there.
TEST(ProgressWatchTest, AGroupFormedAgainIsProgress) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kTrainer, 2, kStart);
  watch.Step(0, 100, At(0));
  watch.Step(0, 101, At(1));
  watch.Regrouped(At(50));
  watch.Step(0, 99, At(50));  // rolled back
  EXPECT_FALSE(watch.Hung(absl::Seconds(30), At(70)));
  watch.Step(0, 100, At(75));
  EXPECT_FALSE(watch.Hung(absl::Seconds(30), At(100)));
  EXPECT_TRUE(watch.Hung(absl::Seconds(30), At(106)));
}

// A rank that left the group (an elastic job shrank) stops reporting for
// good: a hang names a member, the one whose signs of life stopped first.
TEST(ProgressWatchTest, ARankThatLeftIsNeverNamedForAHang) {
  ProgressWatch watch;
  watch.Begin(ProgressWatch::Kind::kTrainer, 3, kStart);
  watch.Step(0, 7, At(3));
  watch.Step(1, 7, At(1));
  watch.Step(2, 7, At(2));
  watch.Left(1);
  std::optional<ProgressWatch::Hang> hang = watch.Hung(absl::Seconds(5), At(9));
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->rank, 2);
}

}  // namespace
}  // namespace ringmaster
