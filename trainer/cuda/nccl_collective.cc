#include "trainer/cuda/nccl_collective.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/cuda/device.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_stream_api.h"
#include "trainer/cuda/nccl_check.h"

namespace ringmaster {

NcclCollective::NcclCollective(int rank, int size, int device, const NcclOptions& options)
    : rank_(rank),
      size_(size),
      device_(device),
      options_(options),
      guard_(&comm_, RealClock::Get(), absl::FromChrono(options.timeout), rank) {}

absl::Status NcclCollective::Comm::AsyncError() {
  ncclResult_t async = ncclSuccess;
  RETURN_IF_ERROR(
      NcclStatus(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError", __FILE__, __LINE__));
  if (async == ncclInProgress) return absl::OkStatus();
  return NcclStatus(async, "NCCL", __FILE__, __LINE__);
}

void NcclCollective::Comm::Abort() { ncclCommAbort(comm); }

void NcclCollective::Comm::Destroy() {
  if (ncclCommDestroy(comm) != ncclSuccess) ncclCommAbort(comm);
}

absl::StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::Connect(
    gloo::rendezvous::Store& store, int rank, int size, int device, const NcclOptions& options) {
  RETURN_IF_ERROR(UseDevice(device));  // this thread issues the collectives
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
  NCCL_RETURN_IF_ERROR(ncclCommInitRank(&c->comm_.comm, size, id, rank));
  c->watchdog_ = std::thread([p = c.get()] { p->Watchdog(); });
  return c;
}

NcclCollective::~NcclCollective() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
  // Each resource is released once, past errors; an aborted communicator
  // is already freed.
  if (comm_.comm != nullptr) guard_.Destroy();
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclCollective::Watchdog() {
  // Its own thread: NCCL's error query and abort act on the rank's device.
  if (!UseDevice(device_).ok()) return;
  MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_),
                               absl::FromChrono(options_.watchdog_interval))) {
    mu_.Unlock();
    guard_.Check();  // never under mu_: the guard's lock may wait for a launch
    mu_.Lock();
  }
}

template <typename F>
absl::Status NcclCollective::Run(const char* what, F enqueue) {
  RETURN_IF_ERROR(guard_.Enqueue(what, [&] {
    RETURN_IF_ERROR(CheckDevice(*CudaStreamApi(), device_));
    return NcclStatus(enqueue(), what, __FILE__, __LINE__);
  }));
  return guard_.Complete(
      CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", __FILE__, __LINE__));
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
  absl::Status status = CudaStatus(cudaMemcpy(device, data, bytes, cudaMemcpyHostToDevice),
                                   "cudaMemcpy", __FILE__, __LINE__);
  if (status.ok()) status = op(device);
  if (status.ok()) {
    status = CudaStatus(cudaMemcpy(data, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy",
                        __FILE__, __LINE__);
  }
  const absl::Status freed = CudaStatus(cudaFree(device), "cudaFree", __FILE__, __LINE__);
  return status.ok() ? freed : status;
}

absl::Status NcclCollective::AllReduceSum(float* data, size_t n) {
  if (n == 0) return absl::OkStatus();
  return OnDevice(data, n * sizeof(float), [&](void* d) {
    return Run("ncclAllReduce",
               [&] { return ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm_.comm, stream_); });
  });
}

absl::Status NcclCollective::AllReduceSumBf16(uint16_t* data, size_t n) {
  if (n == 0) return absl::OkStatus();
  return Run("ncclAllReduce (bf16)", [&] {
    return ncclAllReduce(data, data, n, ncclBfloat16, ncclSum, comm_.comm, stream_);
  });
}

absl::Status NcclCollective::Broadcast(void* data, size_t bytes, int root) {
  if (bytes == 0) return absl::OkStatus();
  return OnDevice(data, bytes, [&](void* d) {
    return Run("ncclBroadcast",
               [&] { return ncclBroadcast(d, d, bytes, ncclUint8, root, comm_.comm, stream_); });
  });
}

absl::Status NcclCollective::Barrier() {
  return Run("ncclAllReduce (barrier)", [&] {
    return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_.comm, stream_);
  });
}

}  // namespace ringmaster
