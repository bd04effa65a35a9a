#include "coordinator/core/straggler_watch.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

// Four ranks report every second: ranks 0-2 compute 10 ms a step, rank 3
// `slow` times that, for `seconds` seconds from `from`.
class StragglerWatchTest : public ::testing::Test {
 protected:
  void Run(absl::Time from, int seconds, double slow) {
    for (int s = 0; s <= seconds; ++s) {
      const absl::Time at = from + absl::Seconds(s);
      for (int rank = 0; rank < 4; ++rank) {
        // 50 steps a second at the pace of the slowest (a collective joins them).
        steps_[rank] += 50;
        compute_[rank] += 50 * 0.010 * (rank == 3 ? slow : 1);
        watch_.Report(rank, at, steps_[rank], compute_[rank], options_);
      }
      last_ = watch_.Evaluate(at, options_);
    }
  }
  const StragglerWatch::Figure* Rank(int rank) {
    for (const auto& f : last_) {
      if (f.rank == rank) return &f;
    }
    return nullptr;
  }

  StragglerOptions options_;
  StragglerWatch watch_;
  int64_t steps_[4] = {};
  double compute_[4] = {};
  std::vector<StragglerWatch::Figure> last_;
};

TEST_F(StragglerWatchTest, ARankSlowForTheWholeWaitIsAStraggler) {
  Run(kStart, 59, 1.8);
  ASSERT_NE(Rank(3), nullptr);
  EXPECT_NEAR(Rank(3)->ratio, 1.8, 1e-9);
  EXPECT_NEAR(Rank(0)->ratio, 1.0, 1e-9);
  EXPECT_NEAR(Rank(3)->seconds_per_step, 0.018, 1e-12);
  EXPECT_FALSE(Rank(3)->straggler) << "slow for 58s only (the first figure came at 1s)";
  Run(kStart + absl::Seconds(60), 0, 1.8);
  EXPECT_FALSE(Rank(3)->straggler) << "59s";
  Run(kStart + absl::Seconds(61), 0, 1.8);
  EXPECT_TRUE(Rank(3)->straggler) << "60s";
  EXPECT_EQ(Rank(3)->slow_since, kStart + absl::Seconds(1));
  EXPECT_FALSE(Rank(0)->straggler);
}

TEST_F(StragglerWatchTest, BelowTheThresholdIsNoStraggler) {
  Run(kStart, 120, 1.25);
  EXPECT_NEAR(Rank(3)->ratio, 1.25, 1e-9);
  EXPECT_FALSE(Rank(3)->straggler);
  EXPECT_EQ(Rank(3)->slow_since, absl::InfiniteFuture());
}

TEST_F(StragglerWatchTest, ARankThatRecoversIsNoLongerSlowAndItsWaitStartsAgain) {
  Run(kStart, 40, 2.0);
  EXPECT_NE(Rank(3)->slow_since, absl::InfiniteFuture());
  // Back to normal speed: once the window holds only fast steps, the ratio
  // falls below the threshold and the wait starts over.
  Run(kStart + absl::Seconds(41), 40, 1.0);
  EXPECT_NEAR(Rank(3)->ratio, 1.0, 1e-9);
  EXPECT_EQ(Rank(3)->slow_since, absl::InfiniteFuture());
  Run(kStart + absl::Seconds(82), 40, 2.0);
  EXPECT_FALSE(Rank(3)->straggler) << "40s slow again, not 60";
}

TEST_F(StragglerWatchTest, TheWindowForgetsOldSteps) {
  Run(kStart, 100, 1.0);
  Run(kStart + absl::Seconds(101), 10, 3.0);
  // Eleven slow seconds (100-111) of the 30s window: (11*3 + 19*1) / 30.
  EXPECT_NEAR(Rank(3)->ratio, 52.0 / 30.0, 1e-9);
}

TEST_F(StragglerWatchTest, OfTwoRanksTheSlowOneStandsOutAndOneRankHasNoRatio) {
  StragglerWatch two;
  for (int s = 0; s <= 2; ++s) {
    two.Report(0, kStart + absl::Seconds(s), 10 * s, 0.1 * s, options_);
    two.Report(1, kStart + absl::Seconds(s), 10 * s, 0.2 * s, options_);
  }
  std::vector<StragglerWatch::Figure> figures = two.Evaluate(kStart + absl::Seconds(2), options_);
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_NEAR(figures[1].ratio, 2.0, 1e-9);
  EXPECT_NEAR(figures[0].ratio, 1.0, 1e-9);

  StragglerWatch one;
  one.Report(0, kStart, 0, 0, options_);
  one.Report(0, kStart + absl::Seconds(1), 10, 1, options_);
  figures = one.Evaluate(kStart + absl::Seconds(1), options_);
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].ratio, 0);

  // A restarted count (a new process) starts the rank's figures over.
  one.Report(0, kStart + absl::Seconds(2), 3, 0.1, options_);
  EXPECT_TRUE(one.Evaluate(kStart + absl::Seconds(2), options_).empty());
}

}  // namespace
}  // namespace ringmaster
