#include "coordinator/core/progress_series.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::Progress At(int64_t step, double loss) {
  v1::Progress p;
  p.set_step(step);
  p.set_loss(loss);
  p.set_allreduce_bytes(4e6);
  p.set_allreduce_seconds(2);
  return p;
}

TEST(ProgressSeriesTest, APointPerNewStepWithItsFigures) {
  ProgressSeries series;
  series.Add(At(0, 9), 0, 1);  // before the first step: nothing to chart
  series.Add(At(10, 2.0), 0, 1000);
  series.Add(At(10, 1.9), 0, 1500);  // the same step again
  series.Add(At(20, 1.0), 0, 2000);
  ASSERT_EQ(series.points().size(), 2u);
  EXPECT_EQ(series.points()[1].step(), 20);
  EXPECT_EQ(series.points()[1].loss(), 1.0);
  EXPECT_EQ(series.points()[1].time_unix_ms(), 2000);
  EXPECT_EQ(series.points()[1].allreduce_mb_per_s(), 2.0);
}

// A restart resumes at an earlier step: its points are kept, in a new
// attempt.
TEST(ProgressSeriesTest, ANewAttemptMayGoBackInSteps) {
  ProgressSeries series;
  series.Add(At(100, 1), 0, 1);
  series.Add(At(80, 1.2), 1, 2);
  series.Add(At(70, 1.3), 1, 3);  // back within one attempt: not a point
  ASSERT_EQ(series.points().size(), 2u);
  EXPECT_EQ(series.points()[1].attempt(), 1);
  EXPECT_EQ(series.points()[1].step(), 80);
}

// However long the run, at most kMaxPoints stay, from its first step to
// near its last, evenly spread.
TEST(ProgressSeriesTest, ALongRunIsThinnedEvenly) {
  ProgressSeries series;
  const int64_t reports = 100'000;
  for (int64_t step = 1; step <= reports; ++step) series.Add(At(step, 1.0 / step), 0, step);
  const auto& points = series.points();
  ASSERT_LE(points.size(), ProgressSeries::kMaxPoints);
  EXPECT_GT(points.size(), ProgressSeries::kMaxPoints / 2);
  EXPECT_EQ(points.front().step(), 1);
  EXPECT_GT(points.back().step(), reports - reports / static_cast<int64_t>(points.size()) * 2);
  const int64_t gap = points[1].step() - points[0].step();
  for (size_t i = 1; i < points.size(); ++i) {
    EXPECT_EQ(points[i].step() - points[i - 1].step(), gap) << i;
  }
}

}  // namespace
}  // namespace ringmaster
