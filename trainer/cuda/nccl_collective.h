// Collective on NCCL for GPU ranks. The ncclUniqueId is exchanged through a
// gloo::rendezvous::Store (the coordinator's store in jobs), every NCCL and
// CUDA return code becomes a Status naming the call, and a watchdog aborts
// the communicator when NCCL reports an asynchronous error or an operation
// outlives the timeout, so a dead peer fails the rank instead of hanging it.
// CommGuard serializes launches, the abort and the teardown: an aborted
// communicator is never touched again.
#ifndef RINGMASTER_TRAINER_CUDA_NCCL_COLLECTIVE_H_
#define RINGMASTER_TRAINER_CUDA_NCCL_COLLECTIVE_H_

#include <cuda_runtime.h>
#include <gloo/rendezvous/store.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "trainer/collective.h"
#include "trainer/comm_guard.h"

namespace ringmaster {

struct NcclOptions {
  std::string prefix = "nccl";
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds watchdog_interval{std::chrono::milliseconds(100)};
};

// Pointers passed to the collectives are device memory on `device`, or
// host memory, which is staged through a device copy (small values only).
// Threading: one thread issues collectives (the Collective contract) and
// makes `device` its current one; the watchdog thread only reads the
// communicator's error state and may abort it, through the guard.
class NcclCollective final : public Collective {
 public:
  static absl::StatusOr<std::unique_ptr<NcclCollective>> Connect(gloo::rendezvous::Store& store,
                                                                 int rank, int size, int device,
                                                                 const NcclOptions& options);
  ~NcclCollective() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  cudaStream_t stream() const { return stream_; }

  absl::Status AllReduceSum(float* data, size_t n) override;
  absl::Status AllReduceSumBf16(uint16_t* data, size_t n) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;

 private:
  // The communicator as CommGuard calls it.
  class Comm final : public GuardedComm {
   public:
    absl::Status AsyncError() override;
    void Abort() override;
    void Destroy() override;
    ncclComm_t comm = nullptr;
  };

  NcclCollective(int rank, int size, int device, const NcclOptions& options);
  // Enqueues an operation through the guard, waits for the stream and
  // completes it; the watchdog may abort it meanwhile.
  template <typename F>
  absl::Status Run(const char* what, F enqueue);
  // Runs `op` on device memory: `data` itself, or a device copy of host
  // memory that is copied back afterwards.
  template <typename F>
  absl::Status OnDevice(void* data, size_t bytes, F op);
  void Watchdog();

  const int rank_, size_, device_;
  const NcclOptions options_;
  Comm comm_;
  CommGuard guard_;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;  // one float, for Barrier

  Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_CUDA_NCCL_COLLECTIVE_H_
