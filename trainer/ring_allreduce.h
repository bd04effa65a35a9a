// Sum all-reduce over the TCP pairs of a Gloo context, built for the links
// between hosts: a ring reduce-scatter then a ring all-gather, so each rank
// sends and receives 2(P-1)/P of the data (the bandwidth optimum). Blocks
// travel in segments, each passed on as soon as it is summed, so summing
// overlaps receiving and the steps overlap one another; receives are posted
// a step ahead, so no sender waits for its peer to be ready.
#ifndef RINGMASTER_TRAINER_RING_ALLREDUCE_H_
#define RINGMASTER_TRAINER_RING_ALLREDUCE_H_

#include <gloo/context.h>

#include <chrono>
#include <memory>
#include <vector>

#include "absl/status/status.h"

namespace ringmaster {

// Not thread-safe: one thread calls AllReduceSum, every rank of the context
// with the same n in the same order.
class RingAllReduce {
 public:
  static constexpr size_t kSegmentFloats = 1 << 19;  // 2 MiB

  // `lanes`: two contexts over the same ranks, each on a device of its own;
  // a rank's messages travel on lane rank % 2, so that (for an even number
  // of ranks) each rank sends on one device's connections while it
  // receives on the other's, and its sends and receives are driven by
  // different threads.
  RingAllReduce(std::shared_ptr<gloo::Context> even, std::shared_ptr<gloo::Context> odd,
                std::chrono::milliseconds timeout)
      : lanes_{std::move(even), std::move(odd)}, timeout_(timeout) {}

  int rank() const { return lanes_[0]->rank; }
  int size() const { return lanes_[0]->size; }

  // In-place sum over the context's ranks; every rank gets the same bits
  // (each block is summed once, by one rank, then passed on). UNAVAILABLE
  // when a peer is gone or the timeout passes.
  absl::Status AllReduceSum(float* data, size_t n);

 private:
  // The ring's steps; throws on a Gloo error.
  void Run(float* data, size_t n);

  std::shared_ptr<gloo::Context> lanes_[2];
  std::chrono::milliseconds timeout_;
  std::vector<float> scratch_;  // two blocks
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_RING_ALLREDUCE_H_
