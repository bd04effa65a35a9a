#include "client/top.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(TopViewTest, RatesComeFromConsecutiveFrames) {
  v1::Job job;
  job.set_id("train-1");
  job.set_state(v1::RUNNING);
  job.set_world_size(4);
  job.mutable_progress()->set_step(100);
  job.mutable_progress()->set_total_steps(1000);
  job.mutable_progress()->set_samples_per_second(5120);
  job.mutable_progress()->set_loss(0.1234);
  job.mutable_progress()->set_allreduce_bytes(8e9);
  job.mutable_progress()->set_allreduce_seconds(2);
  job.mutable_goodput()->set_wall_seconds(100);
  job.mutable_goodput()->set_ratio(0.987);
  v1::Worker gpu;
  gpu.set_id("node-1");
  gpu.set_state(v1::WORKER_STATE_ALIVE);
  gpu.set_slots(2);
  gpu.set_slots_used(1);
  gpu.set_cpu_utilization_ratio(0.5);
  v1::GpuUsage* g = gpu.add_gpu_usage();
  g->set_index(0);
  g->set_utilization_ratio(0.87);
  g->set_memory_used_bytes(4e9);
  g->set_memory_total_bytes(80e9);

  TopView view;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::string first = view.Render({job}, {gpu}, t0);
  EXPECT_NE(first.find("train-1"), std::string::npos) << first;
  EXPECT_NE(first.find("100/1000"), std::string::npos);
  EXPECT_NE(first.find("4.0 (6.0)"), std::string::npos) << "algbw 4 GB/s, busbw x 2*3/4";
  EXPECT_NE(first.find("0:87%"), std::string::npos) << first;
  EXPECT_NE(first.find("0:4.0/80.0G"), std::string::npos);
  EXPECT_NE(first.find("50%"), std::string::npos);
  EXPECT_NE(first.find(" 0.987 "), std::string::npos) << "its goodput: " << first;

  job.mutable_progress()->set_step(120);
  std::string second = view.Render({job}, {gpu}, t0 + absl::Seconds(2));
  EXPECT_NE(second.find(" 10.0 "), std::string::npos) << "20 steps in 2 s: " << second;
}

TEST(TopViewTest, MarksStragglersAndCordonedWorkers) {
  v1::Job job;
  job.set_id("train-1");
  job.set_state(v1::RUNNING);
  v1::Straggler* s = job.add_stragglers();
  s->set_rank(3);
  s->set_ratio(1.84);
  v1::Worker worker;
  worker.set_id("node-1");
  worker.set_state(v1::WORKER_STATE_ALIVE);
  worker.mutable_health()->mutable_cordon()->set_reason("new NIC");
  TopView view;
  const std::string frame = view.Render({job}, {worker}, absl::FromUnixSeconds(1000));
  EXPECT_NE(frame.find("STRAGGLERS"), std::string::npos) << frame;
  EXPECT_NE(frame.find("rank 3 1.8×"), std::string::npos) << frame;
  EXPECT_NE(frame.find("ALIVE CORDONED"), std::string::npos) << frame;
}

}  // namespace
}  // namespace ringmaster
