// Lists the GPUs the CUDA runtime sees, or says why it sees none.
#include <cstdio>

#include "common/cuda/cuda_check.h"

int main() {
  int count = 0;
  absl::Status status = ringmaster::CudaDeviceCount(&count);
  if (!status.ok()) {
    std::printf("no GPU: %s\n", std::string(status.message()).c_str());
    return 0;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    std::printf("gpu %d: %s, %.1f GiB, sm_%d%d\n", i, prop.name,
                prop.totalGlobalMem / double(1 << 30), prop.major, prop.minor);
  }
  return 0;
}
