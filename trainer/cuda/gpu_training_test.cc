#include <gloo/rendezvous/hash_store.h>

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "common/cuda/cuda_check.h"
#include "testing/status_matchers.h"
#include "trainer/cuda/gpu_runner.h"
#include "trainer/cuda/nccl_collective.h"
#include "trainer/test_world.h"
#include "trainer/trainer.h"

namespace ringmaster {
namespace {

v1::TrainerSpec Spec() {
  v1::TrainerSpec spec;
  spec.mutable_model()->add_hidden(64);
  spec.set_batch_size(16);
  spec.set_epochs(1);
  spec.mutable_optimizer()->set_type("sgd");
  spec.mutable_optimizer()->set_lr(0.05);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.set_lr_scaling("none");
  spec.set_bucket_mb(0.01);
  spec.set_seed(3);
  return spec;
}

// One rank per GPU as threads, NCCL between them: rank 0's weights after 10
// steps.
std::vector<float> TrainOnGpus(const v1::TrainerSpec& spec, const TrainTestSplit& data, int world) {
  std::vector<float> params;
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto nccl = NcclCollective::Connect(store, rank, world, rank, NcclOptions{});
      ASSERT_OK(nccl) << nccl.status();
      TrainerContext context;
      context.comm = nccl->get();
      context.stop_after_step = 10;
      cudaStream_t comm_stream = (*nccl)->stream();
      context.make_runner = [comm_stream](const v1::TrainerSpec& sp, const std::vector<int>& w) {
        return MakeGpuRunner(sp, w, comm_stream);
      };
      auto r = Train(spec, data, context);
      ASSERT_OK(r) << r.status();
      if (rank == 0) params = r->params;
    });
  }
  for (auto& t : threads) t.join();
  return params;
}

// One rank per GPU through NCCL against the same ranks on the CPU through
// Gloo: after 10 steps the weights agree to fp32 rounding.
TEST(GpuTrainingTest, NcclRanksMatchCpuRanks) {
  int gpus = 0;
  absl::Status s = CudaDeviceCount(&gpus);
  if (!s.ok() || gpus == 0) GTEST_SKIP() << "no GPU: " << (s.ok() ? "none seen" : s.message());
  const int world = gpus;
  auto all = MakeSynthetic("synthetic:rows=2048,features=32,classes=5");
  ASSERT_OK(all);
  const TrainTestSplit data = SplitAndStandardize(*all, 0.2, 1);
  const v1::TrainerSpec spec = Spec();

  std::vector<float> cpu;
  RunWorld(world, [&](int rank, Collective* comm) {
    TrainerContext context;
    context.comm = comm;
    context.stop_after_step = 10;
    auto r = Train(spec, data, context);
    ASSERT_OK(r) << r.status();
    if (rank == 0) cpu = r->params;
  });

  const std::vector<float> gpu = TrainOnGpus(spec, data, world);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_NEAR(gpu[i], cpu[i], 1e-4 * (1 + std::fabs(cpu[i]))) << "parameter " << i;
  }
}

// bf16 gradient compression through NCCL stays close to the fp32 run.
TEST(GpuTrainingTest, Bf16CompressionStaysCloseToFp32) {
  int gpus = 0;
  absl::Status s = CudaDeviceCount(&gpus);
  if (!s.ok() || gpus == 0) GTEST_SKIP() << "no GPU: " << (s.ok() ? "none seen" : s.message());
  auto all = MakeSynthetic("synthetic:rows=2048,features=32,classes=5");
  ASSERT_OK(all);
  const TrainTestSplit data = SplitAndStandardize(*all, 0.2, 1);
  std::vector<float> results[2];
  for (int compressed = 0; compressed < 2; ++compressed) {
    v1::TrainerSpec spec = Spec();
    if (compressed) spec.set_grad_compression("bf16");
    results[compressed] = TrainOnGpus(spec, data, gpus);
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    ASSERT_NEAR(results[1][i], results[0][i], 2e-2 * (1 + std::fabs(results[0][i]))) << i;
  }
}

}  // namespace
}  // namespace ringmaster
