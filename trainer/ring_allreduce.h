// Sum all-reduce over the TCP pairs of a Gloo context, built for the links
// between hosts: a ring reduce-scatter then a ring all-gather, so each rank
// sends and receives 2(P-1)/P of the data (the bandwidth optimum), with
// every block cut into segments so that summing one segment overlaps
// receiving the next, and every receive posted before the sends so no
// sender waits for its peer to be ready.
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
  static constexpr size_t kSegmentFloats = 1 << 17;  // 512 KiB

  RingAllReduce(std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  int rank() const { return context_->rank; }
  int size() const { return context_->size; }

  // In-place sum over the context's ranks; every rank gets the same bits
  // (each block is summed once, by one rank, then passed on). UNAVAILABLE
  // when a peer is gone or the timeout passes.
  absl::Status AllReduceSum(float* data, size_t n);

 private:
  // One step of the ring: receives `recv_block` from the previous rank
  // (into scratch and summed into data, or straight into data) while
  // sending `send_block` to the next.
  void Step(float* data, size_t n, int send_block, int recv_block, bool sum);

  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  std::vector<float> scratch_;  // one block
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_RING_ALLREDUCE_H_
