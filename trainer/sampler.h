// Which training rows each rank sees, with the semantics of PyTorch's
// DistributedSampler(shuffle=True, drop_last=True).
#ifndef RINGMASTER_TRAINER_SAMPLER_H_
#define RINGMASTER_TRAINER_SAMPLER_H_

#include <cstdint>
#include <vector>

namespace ringmaster {

class DistributedSampler {
 public:
  DistributedSampler(int64_t rows, int rank, int world_size, uint64_t seed)
      : rows_(rows), rank_(rank), world_size_(world_size), seed_(seed) {}

  // The rank's rows for `epoch`: a permutation seeded by seed + epoch,
  // truncated to a multiple of the world size so every rank gets the same
  // count, then every world_size-th row from the rank's offset. No row goes
  // to two ranks.
  //
  // `start` skips the first rows of the permutation: those the world (of
  // any size) consumed before a restart. The rest is dealt out as above, so
  // a job resumed with a different number of ranks sees each remaining row
  // of the epoch once, and at the same size it sees exactly the rows it
  // would have.
  std::vector<int64_t> Indices(int64_t epoch, int64_t start = 0) const;
  int64_t rows_per_rank(int64_t start = 0) const { return (rows_ - start) / world_size_; }

 private:
  int64_t rows_;
  int rank_;
  int world_size_;
  uint64_t seed_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_SAMPLER_H_
