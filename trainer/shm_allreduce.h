// All-reduce through shared memory for ranks on one host: each rank copies
// its chunk in, reduces a 1/world share of it across ranks, and copies the
// whole result out. Far less CPU than the same bytes through loopback TCP,
// which matters when ranks and their communication share a few cores.
#ifndef RINGMASTER_TRAINER_SHM_ALLREDUCE_H_
#define RINGMASTER_TRAINER_SHM_ALLREDUCE_H_

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace ringmaster {

// Not thread-safe: one thread per rank calls AllReduceSum, every rank with
// the same sizes in the same order.
class ShmAllReduce {
 public:
  static constexpr size_t kChunkFloats = 1 << 20;  // 4 MiB per rank per round

  // Rank 0 creates the segment and publishes its name under `key` in
  // `store`; the others open it. The name is unlinked once every rank has
  // it mapped, so nothing outlives the ranks.
  static absl::StatusOr<std::unique_ptr<ShmAllReduce>> Create(gloo::rendezvous::Store& store,
                                                              const std::string& key, int rank,
                                                              int size,
                                                              std::chrono::milliseconds timeout);
  ~ShmAllReduce();

  // In-place sum over ranks. Data inside buffer() is reduced where it
  // lies, without copies. ABORTED as soon as a peer has left (ended, or
  // exited or was killed: its process is watched); DEADLINE_EXCEEDED when a
  // live peer does not arrive within the timeout (it hangs or diverged).
  // After an error the all-reduce is unusable.
  absl::Status AllReduceSum(float* data, size_t n);

  // The hierarchical form, for ranks of one host among several hosts: once
  // this rank has summed its share of a chunk over the ranks of its host,
  // `across` all-reduces that share with the ranks of the other hosts that
  // hold the same share (same local rank, same sizes), before every rank
  // copies the whole result out. The local ranks' shares cross between
  // hosts in parallel.
  using ShareReduce = absl::FunctionRef<absl::Status(float* share, size_t n)>;
  absl::Status AllReduceSum(float* data, size_t n, ShareReduce across);

  // Maps `n` floats per rank that every rank can read and write; returns
  // this rank's part (valid until destruction). Every rank calls it once,
  // with the same n, at the same point.
  absl::StatusOr<float*> MapBuffers(gloo::rendezvous::Store& store, const std::string& key,
                                    size_t n);
  float* buffer() const { return buffers_ == nullptr ? nullptr : Buffer(rank_); }

 private:
  struct Header;
  ShmAllReduce(void* base, size_t bytes, int rank, int size, std::chrono::milliseconds timeout);
  // All ranks wait here.
  absl::Status Barrier();
  // Why a peer is gone, or OK while every peer is there.
  absl::Status PeersGone() const;
  // Peers' processes by pidfd, for ranks that are processes (threads of
  // one process in tests share a pid and watch nothing).
  absl::Status WatchPeers(gloo::rendezvous::Store& store, const std::string& key);
  float* Slot(int set, int rank) const;
  float* Result(int set) const;
  float* Buffer(int rank) const { return buffers_ + static_cast<size_t>(rank) * buffer_floats_; }
  absl::Status ReduceInBuffers(size_t offset, size_t n, ShareReduce across);

  void* base_;
  size_t bytes_;
  Header* header_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  float* buffers_ = nullptr;  // size_ parts of buffer_floats_ each
  size_t buffer_floats_ = 0;
  std::vector<std::pair<int, int>> peer_pidfds_;  // (rank, pidfd)
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_SHM_ALLREDUCE_H_
