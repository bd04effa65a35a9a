#include "trainer/cuda/mlp_cuda.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "common/cuda/cuda_check.h"
#include "testing/status_matchers.h"
#include "trainer/cuda/kernels.h"
#include "trainer/loss.h"
#include "trainer/mlp.h"

namespace ringmaster {
namespace {

bool HaveGpu(std::string* why) {
  int count = 0;
  absl::Status s = CudaDeviceCount(&count);
  if (!s.ok() || count == 0) {
    *why = s.ok() ? "the CUDA runtime sees no device" : std::string(s.message());
    return false;
  }
  return true;
}

// The GPU model against the CPU model it mirrors: same weights, same batch,
// logits and every gradient must agree.
void CompareWithCpu(bool bf16, double tolerance) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const std::vector<int> widths = {32, 64, 48, 10};
  const int rows = 16;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(rows * widths[0]);
  for (float& v : x) v = normal(rng);
  std::vector<int32_t> y(rows);
  for (auto& v : y) v = static_cast<int32_t>(rng() % 10);

  Mlp cpu(widths, 5);
  std::vector<float> dlogits(rows * 10);
  SoftmaxCrossEntropy(cpu.Forward(x.data(), rows), y.data(), rows, 10, dlogits.data());
  cpu.Backward(dlogits.data(), false, nullptr);

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  auto gpu = MlpCuda::Create(widths, 5, rows, bf16, stream);
  ASSERT_OK(gpu) << gpu.status();
  float *dx, *ddl;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ddl, dlogits.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ddl, dlogits.data(), dlogits.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_OK((*gpu)->Forward(dx, rows));
  std::vector<int> order;
  ASSERT_TRUE((*gpu)->Backward(ddl, false, [&](int p) { order.push_back(p); }).ok());
  std::vector<float> grads;
  ASSERT_OK((*gpu)->CopyGradsToHost(&grads));
  ASSERT_EQ(grads.size(), cpu.params().size());
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_NEAR(grads[i], cpu.grads()[i], tolerance * (1e-2 + std::fabs(cpu.grads()[i])))
        << "gradient " << i;
  }
  EXPECT_EQ(order, (std::vector<int>{5, 4, 3, 2, 1, 0}));
  ASSERT_EQ(cudaFree(dx), cudaSuccess);
  ASSERT_EQ(cudaFree(ddl), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(MlpCudaTest, Fp32MatchesTheCpuModel) { CompareWithCpu(false, 1e-3); }
TEST(MlpCudaTest, Bf16AutocastStaysCloseToFp32) { CompareWithCpu(true, 5e-2); }

TEST(KernelsTest, SgdUpdateMatchesTheFormula) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  float p = 1.0f, g = 0.5f, v = 0.25f;
  float *dp, *dg, *dv;
  ASSERT_EQ(cudaMalloc(&dp, 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dg, 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dv, 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dp, &p, 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dg, &g, 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv, &v, 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cuda::SgdUpdate(dp, dg, dv, 1, 0.1f, 0.5f, 0.0f, 0.9f, false, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&p, dp, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&v, dv, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_FLOAT_EQ(v, 0.9f * 0.25f + 0.25f);
  EXPECT_FLOAT_EQ(p, 1.0f - 0.1f * v);
  ASSERT_EQ(cudaFree(dp), cudaSuccess);
  ASSERT_EQ(cudaFree(dg), cudaSuccess);
  ASSERT_EQ(cudaFree(dv), cudaSuccess);
}

}  // namespace
}  // namespace ringmaster
