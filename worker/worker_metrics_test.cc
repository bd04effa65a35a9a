#include "worker/worker_metrics.h"

#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

// The fake NVML library, loaded through the same dlopen path as the real
// one: the series carry exactly the values it was given.
TEST(WorkerMetricsTest, GpuSeriesCarryNvmlValues) {
  setenv("FAKE_NVML_DEVICES",
         "GPU-1111:37:1073741824:17179869184:123456:61:1410:3;"
         "GPU-2222:0:0:17179869184:25000:40:210",
         1);
  auto nvml = Nvml::Load(testing::Runfile("worker/testing/libfake_nvml.so"));
  ASSERT_OK(nvml) << nvml.status();
  metrics::Registry registry;
  WorkerMetrics m(&registry, "w1", *std::move(nvml), [] { return std::vector<RankProcess>{}; });
  const std::string text = registry.Serialize();
  const std::string gpu0 = "{gpu=\"0\",uuid=\"GPU-1111\",worker=\"w1\"}";
  EXPECT_NE(text.find("ringmaster_gpu_utilization_ratio" + gpu0 + " 0.37\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ringmaster_gpu_memory_used_bytes" + gpu0 + " 1073741824\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringmaster_gpu_memory_total_bytes" + gpu0 + " 17179869184\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringmaster_gpu_power_watts" + gpu0 + " 123.456\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_gpu_temperature_celsius" + gpu0 + " 61\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_gpu_sm_clock_hertz" + gpu0 + " 1410000000\n"), std::string::npos);
  EXPECT_NE(text.find("{gpu=\"1\",uuid=\"GPU-2222\",worker=\"w1\"} 40\n"), std::string::npos);
  // ECC errors only for the GPU that has ECC.
  EXPECT_NE(text.find("ringmaster_gpu_uncorrected_ecc_errors" + gpu0 + " 3\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("ringmaster_gpu_uncorrected_ecc_errors{gpu=\"1\""), std::string::npos)
      << text;
  EXPECT_NE(text.find("ringmaster_gpu_retired_pages" + gpu0 + " 0\n"), std::string::npos) << text;

  m.CountXid(1, 79);
  m.CountXid(1, 79);
  EXPECT_NE(registry.Serialize().find(
                "ringmaster_gpu_xid_errors_total{gpu=\"1\",worker=\"w1\",xid=\"79\"} 2\n"),
            std::string::npos)
      << registry.Serialize();
}

TEST(WorkerMetricsTest, MissingNvmlIsAnErrorNotACrash) {
  auto nvml = Nvml::Load("/nonexistent/libnvidia-ml.so.1");
  EXPECT_THAT(nvml.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_NE(nvml.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  metrics::Registry registry;
  WorkerMetrics m(&registry, "w1", nullptr, [] { return std::vector<RankProcess>{}; });
  EXPECT_EQ(registry.Serialize().find("ringmaster_gpu_utilization_ratio{"), std::string::npos);
}

TEST(WorkerMetricsTest, TrainerReportsBecomeCountersAndBusBandwidth) {
  metrics::Registry registry;
  WorkerMetrics m(&registry, "w1", nullptr, [] { return std::vector<RankProcess>{}; });
  v1::RankProgress r;
  r.mutable_rank()->set_job_id("j-1");
  r.mutable_rank()->set_rank(1);
  v1::Progress* p = r.mutable_progress();
  p->set_step(10);
  p->set_samples(640);
  p->set_loss(0.5);
  p->set_allreduce_bytes(4e8);
  p->set_allreduce_seconds(1.0);
  p->set_world_size(4);
  p->add_step_seconds(0.02);
  p->add_step_seconds(0.03);
  m.OnProgress(r);
  p->set_step(15);
  p->set_samples(960);
  p->set_allreduce_bytes(6e8);  // +2e8 bytes in +0.5 s: algbw 4e8 B/s
  p->set_allreduce_seconds(1.5);
  p->clear_step_seconds();
  m.OnProgress(r);
  const std::string text = registry.Serialize();
  const std::string l = "{job_id=\"j-1\",rank=\"1\",worker=\"w1\"}";
  const std::string c = "{backend=\"gloo\",job_id=\"j-1\",rank=\"1\",worker=\"w1\"}";
  EXPECT_NE(text.find("ringmaster_train_steps_total" + l + " 15\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ringmaster_train_samples_total" + l + " 960\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_allreduce_bytes_total" + c + " 600000000\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_allreduce_seconds_total" + c + " 1.5\n"), std::string::npos);
  // busbw = 4e8 * 2 * 3 / 4
  EXPECT_NE(text.find("ringmaster_allreduce_bus_bandwidth_bytes_per_second" + c + " 600000000\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringmaster_step_duration_seconds_count" + l + " 2\n"), std::string::npos);
  // A new attempt starts over: the counter keeps going up.
  p->set_step(3);
  m.OnProgress(r);
  EXPECT_NE(registry.Serialize().find("ringmaster_train_steps_total" + l + " 18\n"),
            std::string::npos);
}

TEST(WorkerMetricsTest, RankCpuUtilizationFromProc) {
  EXPECT_GT(ProcessCpuTicks(getpid()) + 1, 0u);
  EXPECT_EQ(ProcessCpuTicks(999999999), 0u);
  metrics::Registry registry;
  v1::RankRef ref;
  ref.set_job_id("j");
  WorkerMetrics m(&registry, "w1", nullptr, [&] {
    return std::vector<RankProcess>{{ref, getpid(), 0}};
  });
  registry.Serialize();
  // Burn some CPU so the second sample differs.
  volatile double x = 0;
  for (int i = 0; i < 50000000; ++i) x = x + i * 0.5;
  const std::string text = registry.Serialize();
  EXPECT_NE(text.find("ringmaster_rank_cpu_utilization_ratio{job_id=\"j\",rank=\"0\",slot=\"0\","
                      "worker=\"w1\"}"),
            std::string::npos)
      << text;
}

// Series of a job leave /metrics once none of its ranks has run here for
// the retention; those of a job still running stay, and a rank that is gone
// loses its CPU series at once.
TEST(WorkerMetricsTest, EndedJobsSeriesLeaveAfterTheRetention) {
  metrics::Registry registry;
  FakeClock clock;
  Mutex mu;
  std::vector<RankProcess> running;
  v1::RankRef ended, live;
  ended.set_job_id("ended");
  live.set_job_id("live");
  running.push_back({ended, getpid(), 0});
  running.push_back({live, getppid(), 1});
  WorkerMetrics m(
      &registry, "w1", nullptr,
      [&] {
        MutexLock lock(&mu);
        return running;
      },
      &clock, absl::Minutes(10));
  for (const v1::RankRef& ref : {ended, live}) {
    v1::RankProgress r;
    *r.mutable_rank() = ref;
    r.mutable_progress()->set_step(5);
    r.mutable_progress()->set_allreduce_bytes(100);
    r.mutable_progress()->set_allreduce_seconds(1);
    r.mutable_progress()->add_step_seconds(0.1);
    m.OnProgress(r);
  }
  registry.Serialize();
  registry.Serialize();  // a second CPU sample: rank CPU series exist
  const auto series_of = [&](const std::string& job) {
    const std::string text = registry.Serialize();
    int count = 0;
    for (size_t at = text.find("job_id=\"" + job + "\""); at != std::string::npos;
         at = text.find("job_id=\"" + job + "\"", at + 1)) {
      ++count;
    }
    return count;
  };
  ASSERT_GT(series_of("ended"), 5);
  const int live_series = series_of("live");
  {
    MutexLock lock(&mu);
    running.erase(running.begin());
  }
  // The ended job's rank is gone: its CPU series at once, the rest later.
  EXPECT_EQ(series_of("ended"), series_of("live") - 1);
  clock.Advance(absl::Minutes(10) - absl::Seconds(1));
  EXPECT_GT(series_of("ended"), 0);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(series_of("ended"), 0) << registry.Serialize();
  EXPECT_EQ(series_of("live"), live_series);
  // A job that comes back (a new attempt here) reports from zero again.
  v1::RankProgress again;
  *again.mutable_rank() = ended;
  again.mutable_progress()->set_step(2);
  m.OnProgress(again);
  EXPECT_NE(registry.Serialize().find(
                "ringmaster_train_steps_total{job_id=\"ended\",rank=\"0\",worker=\"w1\"} 2\n"),
            std::string::npos);
}

}  // namespace
}  // namespace ringmaster
