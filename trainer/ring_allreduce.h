// Sum all-reduce over a ring of TCP connections, built for the links between
// hosts: a ring reduce-scatter then a ring all-gather, so each rank sends
// and receives 2(P-1)/P of the data (the bandwidth optimum).
//
// Each rank keeps one connection to the next rank, which it sends on, and
// one from the previous, which it receives on. What travels on them is
// known to both ends (the blocks of each step, in order), so the ring needs
// no messages of its own: the calling thread streams bytes with
// non-blocking sockets and poll(), sums what arrives as it arrives and
// passes each summed byte on at once. There is no thread of its own, no
// per-message handshake and no hand-off between threads (as Gloo's pairs
// have), so a byte goes on as soon as the kernel hands it over.
#ifndef RINGMASTER_TRAINER_RING_ALLREDUCE_H_
#define RINGMASTER_TRAINER_RING_ALLREDUCE_H_

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

// Not thread-safe: one thread calls AllReduceSum, every rank of the ring
// with the same n in the same order.
class RingAllReduce {
 public:
  // Joins rank `rank` of a ring of `size` through `store`: listens on
  // `address` (this host's, as the others reach it), publishes its port
  // under `key`, connects to the next rank and accepts the previous one.
  // Blocks until both connections stand, or the timeout.
  static absl::StatusOr<std::unique_ptr<RingAllReduce>> Connect(gloo::rendezvous::Store& store,
                                                                const std::string& key, int rank,
                                                                int size,
                                                                const std::string& address,
                                                                std::chrono::milliseconds timeout);
  ~RingAllReduce();
  RingAllReduce(const RingAllReduce&) = delete;
  RingAllReduce& operator=(const RingAllReduce&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // In-place sum over the ring's ranks; every rank gets the same bits (each
  // block is summed once, by one rank, then passed on). UNAVAILABLE when a
  // peer is gone, DEADLINE_EXCEEDED when nothing moves for the timeout;
  // after either, every later call fails too (the streams are out of step).
  absl::Status AllReduceSum(float* data, size_t n);

 private:
  class Pass;  // one all-reduce's two streams

  RingAllReduce(int rank, int size, int next, int prev, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), next_(next), prev_(prev), timeout_(timeout) {}
  absl::Status Run(float* data, size_t n);
  int next_rank() const { return (rank_ + 1) % size_; }
  int prev_rank() const { return (rank_ + size_ - 1) % size_; }

  const int rank_;
  const int size_;
  const int next_;     // connection to rank + 1: this rank sends on it
  const int prev_;     // connection from rank - 1: this rank receives on it
  int low_water_ = 1;  // prev_'s SO_RCVLOWAT
  const std::chrono::milliseconds timeout_;
  absl::Status broken_;
  std::vector<float> scratch_;  // one block
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_RING_ALLREDUCE_H_
