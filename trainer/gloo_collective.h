// Collective on Gloo's TCP transport, with float all-reduces through shared
// memory within a host and TCP rings of their own between hosts (see
// GlooOptions::shared_memory). Its rendezvous runs on any
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
#include "trainer/host_layout.h"
#include "trainer/ring_allreduce.h"
#include "trainer/shm_allreduce.h"

namespace ringmaster {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // this rank's address for its peers
  std::string prefix = "gloo";         // keys in the store
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // Float all-reduces are hierarchical: through shared memory among the
  // ranks of a host (ShmAllReduce), and over TCP between hosts, each local
  // rank carrying its share in a ring of its own (RingAllReduce). False:
  // plain Gloo over TCP between every pair of ranks.
  bool shared_memory = true;
  // Which host this rank is on, as far as sharing memory goes; empty: this
  // machine's (HostIdentity). Tests set it to play several hosts.
  std::string host_identity;
};

class GlooCollective final : public Collective {
 public:
  // Connects every pair of ranks through `store`, which must outlive the
  // collective; blocks until all `size` ranks have done the same (or the
  // timeout).
  static absl::StatusOr<std::unique_ptr<GlooCollective>> Connect(gloo::rendezvous::Store& store,
                                                                 int rank, int size,
                                                                 const GlooOptions& options);

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string backend() const override { return "gloo"; }
  // How float all-reduces travel, in words.
  std::string transport() const;
  absl::Status AllReduceSum(float* data, size_t n) override;
  absl::Status AllReduceSumBf16(uint16_t* data, size_t n) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;
  float* SharedBuffer(size_t n) override;

 private:
  GlooCollective(std::shared_ptr<gloo::rendezvous::Context> context,
                 std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}
  // Sets up the hierarchical all-reduce for this rank's place in `layout_`.
  absl::Status ConnectHierarchy(gloo::rendezvous::Store& store);

  // For SharedBuffer's rendezvous; the store outlives the collective.
  gloo::rendezvous::Store* store_ = nullptr;
  std::string prefix_;
  std::string hostname_;  // this rank's address, for the ring between hosts

  std::shared_ptr<gloo::rendezvous::Context> context_;
  HostLayout layout_;
  std::unique_ptr<ShmAllReduce> shm_;      // the ranks of this host, when several
  std::unique_ptr<RingAllReduce> across_;  // this rank's peers on the other hosts
  std::chrono::milliseconds timeout_;
  uint32_t next_tag_ = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_GLOO_COLLECTIVE_H_
