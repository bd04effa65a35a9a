// CUDA runtime calls checked at the boundary: each error becomes an
// absl::Status naming the call and where it was made.
#ifndef RINGMASTER_COMMON_CUDA_CUDA_CHECK_H_
#define RINGMASTER_COMMON_CUDA_CUDA_CHECK_H_

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {

inline absl::Status CudaStatus(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, ": ", cudaGetErrorString(error), " (", file, ":", line, ")"));
}

// OK with the count, or the reason there is no usable GPU ("CUDA driver
// version is insufficient..." on a machine without one).
inline absl::Status CudaDeviceCount(int* count) {
  *count = 0;
  return CudaStatus(cudaGetDeviceCount(count), "cudaGetDeviceCount", __FILE__, __LINE__);
}

}  // namespace ringmaster

#define CUDA_RETURN_IF_ERROR(call)                                                             \
  do {                                                                                         \
    ::absl::Status cuda_status_ = ::ringmaster::CudaStatus((call), #call, __FILE__, __LINE__); \
    if (!cuda_status_.ok()) return cuda_status_;                                               \
  } while (false)

#endif  // RINGMASTER_COMMON_CUDA_CUDA_CHECK_H_
