#include <vector>

#include <gtest/gtest.h>

#include "common/cuda/cuda_check.h"

namespace ringmaster {
cudaError_t VectorAdd(const float* a, const float* b, float* out, int n, cudaStream_t stream);
namespace {

TEST(VectorAddTest, AddsOnEveryGpu) {
  int count = 0;
  absl::Status status = CudaDeviceCount(&count);
  if (!status.ok() || count == 0) GTEST_SKIP() << "no GPU: " << status.message();
  constexpr int n = 1 << 20;
  std::vector<float> a(n), b(n), out(n);
  for (int i = 0; i < n; ++i) {
    a[i] = i;
    b[i] = 2 * i;
  }
  for (int device = 0; device < count; ++device) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    float *da, *db, *dout;
    ASSERT_EQ(cudaMalloc(&da, n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dout, n * sizeof(float)), cudaSuccess);
    cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    ASSERT_EQ(VectorAdd(da, db, dout, n, nullptr), cudaSuccess);
    cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i += 4099) ASSERT_EQ(out[i], 3.0f * i);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
  }
}

}  // namespace
}  // namespace ringmaster
