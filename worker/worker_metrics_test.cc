#include "worker/worker_metrics.h"

#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

std::string FakeNvmlPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "ringmaster") +
         "/worker/testing/libfake_nvml.so";
}

// The fake NVML library, loaded through the same dlopen path as the real
// one: the series carry exactly the values it was given.
TEST(WorkerMetricsTest, GpuSeriesCarryNvmlValues) {
  setenv("FAKE_NVML_DEVICES",
         "GPU-1111:37:1073741824:17179869184:123456:61:1410;"
         "GPU-2222:0:0:17179869184:25000:40:210",
         1);
  auto nvml = Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
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
  EXPECT_NE(text.find("ringmaster_gpu_sm_clock_hertz" + gpu0 + " 1410000000\n"),
            std::string::npos);
  EXPECT_NE(text.find("{gpu=\"1\",uuid=\"GPU-2222\",worker=\"w1\"} 40\n"), std::string::npos);
}

TEST(WorkerMetricsTest, MissingNvmlIsAnErrorNotACrash) {
  auto nvml = Nvml::Load("/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kUnavailable);
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
  const std::string l = "{job=\"j-1\",rank=\"1\"}";
  const std::string c = "{backend=\"gloo\",job=\"j-1\",rank=\"1\"}";
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
  EXPECT_NE(text.find("ringmaster_rank_cpu_utilization_ratio{job=\"j\",rank=\"0\",slot=\"0\","
                      "worker=\"w1\"}"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ringmaster
