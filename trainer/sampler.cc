#include "trainer/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace ringmaster {

std::vector<int64_t> DistributedSampler::Indices(int64_t epoch, int64_t start) const {
  std::vector<int64_t> all(rows_);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(seed_ + static_cast<uint64_t>(epoch));
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> mine;
  start = std::clamp<int64_t>(start, 0, rows_);
  mine.reserve(rows_per_rank(start));
  const int64_t end = start + rows_per_rank(start) * world_size_;
  for (int64_t i = start + rank_; i < end; i += world_size_) mine.push_back(all[i]);
  return mine;
}

}  // namespace ringmaster
