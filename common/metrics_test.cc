#include "common/metrics.h"

#include <cmath>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ringmaster::metrics {
namespace {

TEST(MetricsTest, CountersAndGaugesInTextFormat) {
  Registry registry;
  auto& steps = BuildCounter().Name("train_steps_total").Help("Steps.").Register(registry);
  steps.Add({{"job", "a"}, {"rank", "0"}}).Increment(3);
  steps.Add({{"rank", "0"}, {"job", "a"}}).Increment();  // same series, labels sorted
  auto& loss = BuildGauge().Name("train_loss").Help("Loss.").Register(registry);
  loss.Add({}).Set(0.25);
  EXPECT_EQ(registry.Serialize(),
            "# HELP train_loss Loss.\n"
            "# TYPE train_loss gauge\n"
            "train_loss 0.25\n"
            "# HELP train_steps_total Steps.\n"
            "# TYPE train_steps_total counter\n"
            "train_steps_total{job=\"a\",rank=\"0\"} 4\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  auto& f = BuildGauge().Name("g").Help("a \\ b\nc").Register(registry);
  f.Add({{"path", "C:\\dir \"x\"\nnext"}}).Set(1);
  EXPECT_EQ(registry.Serialize(),
            "# HELP g a \\\\ b\\nc\n"
            "# TYPE g gauge\n"
            "g{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry registry;
  auto& f = BuildHistogram().Name("step_seconds").Help("Step.").Register(registry);
  Histogram& h = f.Add({{"job", "j"}}, Histogram::BucketBoundaries{0.1, 1});
  for (double v : {0.05, 0.1, 0.5, 3.0}) h.Observe(v);
  EXPECT_EQ(registry.Serialize(),
            "# HELP step_seconds Step.\n"
            "# TYPE step_seconds histogram\n"
            "step_seconds_bucket{job=\"j\",le=\"0.1\"} 2\n"
            "step_seconds_bucket{job=\"j\",le=\"1\"} 3\n"
            "step_seconds_bucket{job=\"j\",le=\"+Inf\"} 4\n"
            "step_seconds_sum{job=\"j\"} 3.65\n"
            "step_seconds_count{job=\"j\"} 4\n");
}

TEST(MetricsTest, SpecialValues) {
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(0.1 + 0.2), "0.30000000000000004") << "round-trips exactly";
}

TEST(MetricsTest, ConcurrentIncrementsAreNotLost) {
  Registry registry;
  Counter& c = BuildCounter().Name("c_total").Help("c").Register(registry).Add({});
  Histogram& h = BuildHistogram().Name("h").Help("h").Register(registry).Add(
      {}, Histogram::BucketBoundaries{1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) {
        c.Increment();
        h.Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Value(), 400000);
  EXPECT_EQ(h.Collect().cumulative.back(), 400000u);
  EXPECT_EQ(h.Collect().sum, 200000);
}

TEST(MetricsTest, SameNameAndTypeIsOneFamilyAndRemoveForgetsASeries) {
  Registry registry;
  auto& a = registry.AddGauge("x", "x");
  auto& b = registry.AddGauge("x", "x");
  EXPECT_EQ(&a, &b);
  a.Add({{"k", "1"}}).Set(1);
  a.Add({{"k", "2"}}).Set(2);
  a.Remove({{"k", "1"}});
  EXPECT_EQ(registry.Serialize(), "# HELP x x\n# TYPE x gauge\nx{k=\"2\"} 2\n");
}

TEST(MetricsTest, RemoveMatchingForgetsEverySeriesWithThoseLabels) {
  Registry registry;
  auto& steps = registry.AddCounter("steps_total", "steps");
  steps.Add({{"job_id", "a"}, {"rank", "0"}}).Increment();
  steps.Add({{"job_id", "a"}, {"rank", "1"}}).Increment();
  steps.Add({{"job_id", "ab"}, {"rank", "0"}}).Increment(2);
  steps.Add({{"rank", "0"}}).Increment(3);
  steps.RemoveMatching({{"job_id", "a"}});
  EXPECT_EQ(registry.Serialize(),
            "# HELP steps_total steps\n# TYPE steps_total counter\n"
            "steps_total{job_id=\"ab\",rank=\"0\"} 2\nsteps_total{rank=\"0\"} 3\n");
}

TEST(MetricsTest, CollectCallbacksRunBeforeEachScrape) {
  Registry registry;
  Gauge& age = registry.AddGauge("age_seconds", "age").Add({});
  int scrapes = 0;
  registry.AddCollectCallback([&] { age.Set(++scrapes); });
  registry.Serialize();
  EXPECT_NE(registry.Serialize().find("age_seconds 2\n"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster::metrics
