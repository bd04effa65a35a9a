// Collective on Gloo's TCP transport. Its rendezvous runs on any
// gloo::rendezvous::Store: the coordinator's store for real jobs
// (CoordinatorGlooStore), an in-memory HashStore for ranks-as-threads tests.
#ifndef RINGMASTER_TRAINER_GLOO_COLLECTIVE_H_
#define RINGMASTER_TRAINER_GLOO_COLLECTIVE_H_

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/collective.h"
#include "trainer/shm_allreduce.h"

namespace ringmaster {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // this rank's address for its peers
  std::string prefix = "gloo";         // keys in the store
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // When every rank is on this host, float all-reduces go through shared
  // memory (ShmAllReduce) instead of loopback TCP.
  bool shared_memory = true;
};

class GlooCollective final : public Collective {
 public:
  // Connects every pair of ranks through `store`, which must outlive the
  // collective; blocks until all `size` ranks have done the same (or the
  // timeout).
  static absl::StatusOr<std::unique_ptr<GlooCollective>> Connect(
      gloo::rendezvous::Store& store, int rank, int size, const GlooOptions& options);

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string backend() const override { return "gloo"; }
  // How float all-reduces travel: "shared memory" or "tcp".
  std::string transport() const { return shm_ ? "shared memory" : "tcp"; }
  absl::Status AllReduceSum(float* data, size_t n) override;
  absl::Status AllReduceSumBf16(uint16_t* data, size_t n) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;
  float* SharedBuffer(size_t n) override;

 private:
  GlooCollective(std::shared_ptr<gloo::rendezvous::Context> context,
                 std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  // For SharedBuffer's rendezvous; the store outlives the collective.
  gloo::rendezvous::Store* store_ = nullptr;
  std::string prefix_;

  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::unique_ptr<ShmAllReduce> shm_;
  std::chrono::milliseconds timeout_;
  uint32_t next_tag_ = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_GLOO_COLLECTIVE_H_
