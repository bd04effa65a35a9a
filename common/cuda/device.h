// The calling thread's CUDA device. The CUDA runtime keeps a current
// device per thread, and a thread that never sets one works on device 0:
// every thread that touches CUDA (the training thread, the reducer, the
// NCCL watchdog) calls UseDevice first, and work for a rank's GPU checks
// it (CheckDevice in trainer/step_streams.h).
#ifndef RINGMASTER_COMMON_CUDA_DEVICE_H_
#define RINGMASTER_COMMON_CUDA_DEVICE_H_

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "common/cuda/cuda_check.h"

namespace ringmaster {

// Makes `device` the calling thread's current device.
inline absl::Status UseDevice(int device) {
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice", __FILE__, __LINE__);
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CUDA_DEVICE_H_
