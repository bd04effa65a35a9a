#include "trainer/cuda/nccl_collective.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trainer/cuda/nccl_check.h"

namespace ringmaster {

NcclCollective::NcclCollective(int rank, int size, int device, const NcclOptions& options)
    : rank_(rank), size_(size), device_(device), options_(options) {}

absl::StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::Connect(
    gloo::rendezvous::Store& store, int rank, int size, int device,
    const NcclOptions& options) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ncclUniqueId id;
  const std::string key = absl::StrCat(options.prefix, "/unique-id");
  try {
    if (rank == 0) {
      NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
      store.set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      store.wait({key}, options.timeout);
      std::vector<char> bytes = store.get(key);
      if (bytes.size() != sizeof(id.internal)) {
        return absl::DataLossError(absl::StrCat("NCCL unique id of ", bytes.size(),
                                                " bytes, expected ", sizeof(id.internal)));
      }
      std::memcpy(id.internal, bytes.data(), bytes.size());
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("NCCL bootstrap through the store: ", e.what()));
  }
  std::unique_ptr<NcclCollective> c(new NcclCollective(rank, size, device, options));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&c->scratch_, sizeof(float)));
  NCCL_RETURN_IF_ERROR(ncclCommInitRank(&c->comm_, size, id, rank));
  c->watchdog_ = std::thread([p = c.get()] { p->Watchdog(); });
  return c;
}

NcclCollective::~NcclCollective() {
  bool aborted;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    aborted = aborted_;
  }
  if (watchdog_.joinable()) watchdog_.join();
  // Teardown keeps going past errors: each resource is released once.
  if (comm_ != nullptr && !aborted) {
    if (ncclCommDestroy(comm_) != ncclSuccess) ncclCommAbort(comm_);
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclCollective::Watchdog() {
  MutexLock lock(&mu_);
  for (;;) {
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::FromChrono(options_.watchdog_interval))) {
      return;
    }
    if (aborted_) continue;
    ncclResult_t async = ncclSuccess;
    absl::Status status = NcclStatus(ncclCommGetAsyncError(comm_, &async),
                                     "ncclCommGetAsyncError", __FILE__, __LINE__);
    if (status.ok() && async != ncclSuccess && async != ncclInProgress) {
      status = NcclStatus(async, "NCCL asynchronous error", __FILE__, __LINE__);
    }
    if (status.ok() && inflight_ &&
        std::chrono::steady_clock::now() - inflight_since_ > options_.timeout) {
      status = absl::DeadlineExceededError(absl::StrCat(
          "NCCL operation on rank ", rank_, " exceeded ",
          std::chrono::duration_cast<std::chrono::seconds>(options_.timeout).count(),
          " s; a peer is gone or stuck"));
    }
    if (!status.ok()) {
      if (error_.ok()) error_ = status;
      // Abort makes the kernels in flight return, so the waiting rank fails.
      ncclCommAbort(comm_);
      aborted_ = true;
    }
  }
}

template <typename F>
absl::Status NcclCollective::Run(const char* what, F enqueue) {
  {
    MutexLock lock(&mu_);
    if (aborted_) return error_;
    inflight_ = true;
    inflight_since_ = std::chrono::steady_clock::now();
  }
  absl::Status status = NcclStatus(enqueue(), what, __FILE__, __LINE__);
  if (status.ok()) {
    status = CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", __FILE__,
                        __LINE__);
  }
  MutexLock lock(&mu_);
  inflight_ = false;
  if (aborted_) return error_;  // the watchdog's reason is the real one
  if (!status.ok() && error_.ok()) error_ = status;
  return status;
}

template <typename F>
absl::Status NcclCollective::OnDevice(void* data, size_t bytes, F op) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) == cudaSuccess &&
      attributes.type == cudaMemoryTypeDevice) {
    return op(data);
  }
  cudaGetLastError();  // clear the error a host pointer may leave
  void* device = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&device, bytes));
  absl::Status status =
      CudaStatus(cudaMemcpy(device, data, bytes, cudaMemcpyHostToDevice), "cudaMemcpy", __FILE__,
                 __LINE__);
  if (status.ok()) status = op(device);
  if (status.ok()) {
    status = CudaStatus(cudaMemcpy(data, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy",
                        __FILE__, __LINE__);
  }
  cudaFree(device);
  return status;
}

absl::Status NcclCollective::AllReduceSum(float* data, size_t n) {
  if (n == 0) return absl::OkStatus();
  return OnDevice(data, n * sizeof(float), [&](void* d) {
    return Run("ncclAllReduce", [&] {
      return ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm_, stream_);
    });
  });
}

absl::Status NcclCollective::AllReduceSumBf16(uint16_t* data, size_t n) {
  if (n == 0) return absl::OkStatus();
  return Run("ncclAllReduce (bf16)", [&] {
    return ncclAllReduce(data, data, n, ncclBfloat16, ncclSum, comm_, stream_);
  });
}

absl::Status NcclCollective::Broadcast(void* data, size_t bytes, int root) {
  if (bytes == 0) return absl::OkStatus();
  return OnDevice(data, bytes, [&](void* d) {
    return Run("ncclBroadcast", [&] {
      return ncclBroadcast(d, d, bytes, ncclUint8, root, comm_, stream_);
    });
  });
}

absl::Status NcclCollective::Barrier() {
  return Run("ncclAllReduce (barrier)", [&] {
    return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
  });
}

}  // namespace ringmaster
