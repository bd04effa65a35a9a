// A search for the running jobs a pending job preempts (queue_scheduler.cc
// chooses the candidates and the order): the ranks each candidate would
// release, and the capacity left once they have.
#ifndef RINGMASTER_COORDINATOR_SCHEDULING_VICTIM_SEARCH_H_
#define RINGMASTER_COORDINATOR_SCHEDULING_VICTIM_SEARCH_H_

#include <cstddef>
#include <map>
#include <string_view>
#include <vector>

#include "coordinator/scheduling/queue_scheduler.h"
#include "coordinator/scheduling/scheduler.h"
#include "domain/queue_config.h"

namespace ringmaster {

// The fewest ranks `r` runs with: min_ranks for an elastic job, else all.
int FewestRanks(const GangRequest& r);

struct VictimSearch {
  std::vector<const RunningJob*> candidates;  // in the order they are taken
  std::vector<int> released;                  // ranks, by candidate
  std::vector<WorkerCapacity> capacity;
  std::map<std::string_view, SlotAmount> lent_back;  // what each other queue gives up
};

// Releases more of candidate i's ranks: one at a time, down to `keep`,
// until `request` fits (an elastic shrink); or, with `keep` 0, all of them
// at once. True when it fits.
bool ReleaseRanks(VictimSearch& v, size_t i, int keep, const GangRequest& request);

// Only as many as needed: spares, the last chosen first, each victim whose
// slots `request` does not need after all.
void SpareUnneeded(VictimSearch& v, const GangRequest& request);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SCHEDULING_VICTIM_SEARCH_H_
