#include "trainer/cuda/nccl_collective.h"

#include <gloo/rendezvous/hash_store.h>

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/cuda/cuda_check.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

int GpuCount(std::string* why) {
  int count = 0;
  absl::Status s = CudaDeviceCount(&count);
  if (!s.ok()) *why = std::string(s.message());
  if (s.ok() && count == 0) *why = "the CUDA runtime sees no device";
  return s.ok() ? count : 0;
}

// One rank per GPU, as threads.
TEST(NcclCollectiveTest, AllReduceAndBroadcastOnEveryGpu) {
  std::string why;
  const int world = GpuCount(&why);
  if (world == 0) GTEST_SKIP() << "no GPU: " << why;
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto nccl = NcclCollective::Connect(store, rank, world, rank, NcclOptions{});
      ASSERT_OK(nccl) << nccl.status();
      const size_t n = 1 << 20;
      std::vector<float> host(n, rank + 1.0f);
      float* device;
      ASSERT_EQ(cudaMalloc(&device, n * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(device, host.data(), n * sizeof(float), cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_OK((*nccl)->AllReduceSum(device, n));
      ASSERT_EQ(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(host[n - 1], world * (world + 1) / 2.0f);
      ASSERT_OK((*nccl)->Broadcast(device, 16, 0));
      ASSERT_OK((*nccl)->Barrier());
      ASSERT_EQ(cudaFree(device), cudaSuccess);
    });
  }
  for (auto& t : threads) t.join();
}

// A peer that never joins: the watchdog aborts and the rank gets an error.
TEST(NcclCollectiveTest, WatchdogAbortsAHungAllReduce) {
  std::string why;
  if (GpuCount(&why) < 2) GTEST_SKIP() << "needs 2 GPUs: " << (why.empty() ? "fewer here" : why);
  gloo::rendezvous::HashStore store;
  NcclOptions options;
  options.timeout = std::chrono::seconds(3);
  std::unique_ptr<NcclCollective> peer;
  std::thread t([&] {
    auto c = NcclCollective::Connect(store, 1, 2, 1, options);
    ASSERT_OK(c) << c.status();
    peer = *std::move(c);
  });
  auto nccl = NcclCollective::Connect(store, 0, 2, 0, options);
  t.join();
  ASSERT_OK(nccl) << nccl.status();
  float* device;
  ASSERT_EQ(cudaMalloc(&device, 1024 * sizeof(float)), cudaSuccess);
  absl::Status status = (*nccl)->AllReduceSum(device, 1024);  // rank 1 never calls
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded)) << status;
  ASSERT_EQ(cudaFree(device), cudaSuccess);
}

}  // namespace
}  // namespace ringmaster
