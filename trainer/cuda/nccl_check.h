// NCCL and cuBLAS return codes as absl::Status, with the call and file:line.
#ifndef RINGMASTER_TRAINER_CUDA_NCCL_CHECK_H_
#define RINGMASTER_TRAINER_CUDA_NCCL_CHECK_H_

#include <cublas_v2.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/cuda_check.h"

namespace ringmaster {

inline absl::Status NcclStatus(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(call, ": ", ncclGetErrorString(result), " (", file, ":", line, ")"));
}

inline absl::Status CublasStatus(cublasStatus_t status, const char* call, const char* file,
                                 int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, ": ", cublasGetStatusString(status), " (", file, ":", line, ")"));
}

}  // namespace ringmaster

#define NCCL_RETURN_IF_ERROR(call)                                                             \
  do {                                                                                         \
    ::absl::Status nccl_status_ = ::ringmaster::NcclStatus((call), #call, __FILE__, __LINE__); \
    if (!nccl_status_.ok()) return nccl_status_;                                               \
  } while (false)

#define CUBLAS_RETURN_IF_ERROR(call)                                                               \
  do {                                                                                             \
    ::absl::Status cublas_status_ = ::ringmaster::CublasStatus((call), #call, __FILE__, __LINE__); \
    if (!cublas_status_.ok()) return cublas_status_;                                               \
  } while (false)

#endif  // RINGMASTER_TRAINER_CUDA_NCCL_CHECK_H_
