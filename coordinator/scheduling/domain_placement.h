// Where a gang goes on a cluster whose workers sit in a tree of network
// domains (--topology-levels, widest first: block, rack, host). At each
// level, from the widest down, the gang goes to the smallest domain that
// holds all of it (best fit, so that whole domains stay free for large
// jobs); when none does, to the fewest domains, roomiest first, with what
// is left in the smallest domain that holds it. Its ranks are numbered
// domain by domain: a host's ranks are consecutive, so are a rack's hosts,
// and a ring or a hierarchical all-reduce over rank order follows the
// links.
#ifndef RINGMASTER_COORDINATOR_SCHEDULING_DOMAIN_PLACEMENT_H_
#define RINGMASTER_COORDINATOR_SCHEDULING_DOMAIN_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/scheduling/scheduler.h"

namespace ringmaster {

// `ranks` of the gang on workers[worker].
struct WorkerShare {
  int worker = 0;
  int ranks = 0;
};

// Places `request` on `workers`, each of which can take rooms[i] of its
// ranks (what its free slots, CPUs, memory and labels allow), and all of
// which have one domain per level. With placement.pack_level and
// pack_required, the whole gang is in one domain of that level (the
// smallest that holds it); with pack preferred, there when one holds it,
// else as without. With spread_level, at most one rank per domain of that
// level. An elastic request (0 < min_ranks < ranks) gets as many ranks as
// fit, when at least min_ranks do; packed, in the domain that has most room
// of those that could hold all of its ranks with nothing running, by
// `idle_rooms` (what each worker could take then), else of all. The shares
// come in rank order.
// RESOURCE_EXHAUSTED with a reason for people when it does not fit: "no
// rack with 16 free slots; the largest has 12".
absl::StatusOr<std::vector<WorkerShare>> PlaceInDomains(
    const std::vector<WorkerCapacity>& workers, const std::vector<int>& rooms,
    const GangRequest& request, const std::vector<int>* idle_rooms = nullptr);

// What one domain of a topology level has, of the workers' slots.
struct DomainSlots {
  int level = 0;
  int domain = 0;  // the workers' id for it
  int64_t total = 0;
  int64_t free = 0;
};

// A domain's slots by the names people see (/metrics).
struct DomainGauge {
  std::string level;
  std::string domain;  // its path: "b1/r1"
  int64_t total_slots = 0;
  int64_t free_slots = 0;
};

// Each domain of each level with its slots, from `capacity` (FreeCapacity
// of the schedulable workers), in the order of the domains' first workers.
std::vector<DomainSlots> SlotsByDomain(const std::vector<WorkerCapacity>& capacity);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SCHEDULING_DOMAIN_PLACEMENT_H_
