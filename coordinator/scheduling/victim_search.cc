#include "coordinator/scheduling/victim_search.h"

#include "coordinator/scheduling/queue_scheduler.h"

namespace ringmaster {

int FewestRanks(const GangRequest& r) {
  return r.min_ranks > 0 && r.min_ranks < r.ranks ? r.min_ranks : r.ranks;
}

bool ReleaseRanks(VictimSearch& v, size_t i, int keep, const GangRequest& request) {
  const RunningJob& r = *v.candidates[i];
  int& done = v.released[i];
  const int world = static_cast<int>(r.ranks.size());
  while (done < world - keep) {
    const int step = keep > 0 ? 1 : world - done;
    ReturnCapacity(v.capacity,
                   std::vector<RankPlacement>(r.ranks.end() - done - step, r.ranks.end() - done),
                   r.request);
    done += step;
    v.lent_back[r.queue] = v.lent_back[r.queue] + AmountOf(r.request, step);
    if (PlaceGang(v.capacity, request).ok()) return true;
  }
  return false;
}

void SpareUnneeded(VictimSearch& v, const GangRequest& request) {
  for (size_t i = v.candidates.size(); i-- > 0;) {
    if (v.released[i] == 0) continue;
    const RunningJob& r = *v.candidates[i];
    std::vector<WorkerCapacity> without = v.capacity;
    TakeCapacity(without, std::vector<RankPlacement>(r.ranks.end() - v.released[i], r.ranks.end()),
                 r.request);
    if (PlaceGang(without, request).ok()) {
      v.capacity = std::move(without);
      v.released[i] = 0;
    }
  }
}

}  // namespace ringmaster
