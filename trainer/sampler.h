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
  std::vector<int64_t> Indices(int64_t epoch) const;
  int64_t rows_per_rank() const { return rows_ / world_size_; }

 private:
  int64_t rows_;
  int rank_;
  int world_size_;
  uint64_t seed_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_SAMPLER_H_
