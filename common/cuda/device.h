// The calling thread's CUDA device. The CUDA runtime keeps a current
// device per thread, and a thread that never sets one works on device 0:
// every thread that touches CUDA (the training thread, the reducer, the
// NCCL watchdog) calls UseDevice first, and launches check it in debug
// builds.
#ifndef RINGMASTER_COMMON_CUDA_DEVICE_H_
#define RINGMASTER_COMMON_CUDA_DEVICE_H_

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "common/cuda/cuda_check.h"

namespace ringmaster {

// Makes `device` the calling thread's current device.
inline absl::Status UseDevice(int device) {
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice", __FILE__, __LINE__);
}

// In debug builds, aborts naming both devices when the calling thread's
// current device is not `device`; nothing in optimized builds.
inline void DCheckCurrentDevice(int device) {
#ifndef NDEBUG
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device) {
    std::fprintf(stderr, "CUDA work for device %d launched from a thread on device %d\n", device,
                 current);
    std::abort();
  }
#else
  (void)device;
#endif
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CUDA_DEVICE_H_
