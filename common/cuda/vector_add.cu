// A minimal kernel that proves the nvcc build and, on a GPU, the runtime.
#include <cuda_runtime.h>

namespace ringmaster {

__global__ void VectorAddKernel(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

cudaError_t VectorAdd(const float* a, const float* b, float* out, int n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  VectorAddKernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(a, b, out, n);
  return cudaGetLastError();
}

}  // namespace ringmaster
