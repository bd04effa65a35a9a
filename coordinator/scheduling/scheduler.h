// Gang scheduling: a job's ranks are placed all at once or not at all,
// packed onto as few workers as possible. Pure functions over a snapshot of
// capacity, so the policy is tested without daemons.
#ifndef RINGMASTER_COORDINATOR_SCHEDULING_SCHEDULER_H_
#define RINGMASTER_COORDINATOR_SCHEDULING_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "coordinator/core/schedulable_worker.h"

namespace ringmaster {

// What one alive worker can offer now. Workers are listed in a stable order
// (registration order); rank order follows it. A worker that registered no
// CPUs (or no memory) is not limited by them.
struct WorkerCapacity {
  std::string worker_id;
  int total_slots = 0;
  std::vector<int> free_slots;  // ascending slot indices
  bool gpu_slots = false;       // each slot is one GPU
  SharedLabels labels;
  int total_cpus = 0;  // 0: not counted
  int free_cpus = 0;
  int64_t total_memory_mb = 0;  // 0: not counted
  int64_t free_memory_mb = 0;
  // Its domain at each --topology-levels level, widest first: an id that
  // the workers of one domain share (a rack's is its own in whichever
  // block); -1 where it has no value for the level. Empty without levels.
  TopologyDomains domains;
  // One of the --spare-workers: only a request that may use spares
  // (UsesSpares) is placed on it.
  bool spare = false;
};

// The slots placed ranks hold on a worker (one a rank, or one per GPU),
// and what else they reserved: a view of the caller's placement.
struct HeldSlots {
  std::string_view worker_id;
  absl::Span<const int> slots;  // slot indices
  int cpus = 0;
  int64_t memory_mb = 0;
};

// What each schedulable worker has free: its slots minus those `held` by
// placed ranks and those of rank processes the worker reports running
// (ranks of attempts that ended while it was away keep their slots until
// they exit), except the reports of `except_job`.
std::vector<WorkerCapacity> FreeCapacity(const std::vector<SchedulableWorker>& workers,
                                         const std::vector<HeldSlots>& held,
                                         const std::string& except_job);

struct RankPlacement {
  int rank = 0;
  std::string worker_id;
  std::vector<int> slots;  // one slot, or gpus_per_rank GPU slots
  // Where the worker was in the capacity it was placed from (PlaceGang);
  // -1: unknown.
  int worker_index = -1;
};

// Where in the network a job wants its ranks (placement in its spec):
// levels are indices into --topology-levels.
struct PlacementRequest {
  int pack_level = -1;        // the whole gang in one domain of this level
  bool pack_required = true;  // else preferred: packed when it can be
  int spread_level = -1;      // at most one rank per domain of this level
  std::string pack_name;      // the levels' names, for reasons
  std::string spread_name;
  bool operator==(const PlacementRequest& o) const {
    return pack_level == o.pack_level && pack_required == o.pack_required &&
           spread_level == o.spread_level;
  }
};

// What a job asks of the cluster: its ranks and what each one needs.
struct GangRequest {
  int ranks = 0;
  int gpus_per_rank = 0;     // 0: one CPU slot per rank; else that many GPU slots
  int min_ranks = 0;         // elastic lower bound; 0: ranks
  int cpus = 0;              // per rank; 0: not counted
  int64_t memory_mb = 0;     // per rank; 0: not counted
  int ranks_per_worker = 0;  // 0: as few workers as possible
  std::map<std::string, std::string> selector;  // labels a worker must have
  std::vector<std::string> avoid;               // workers it must not use
  PlacementRequest placement;
  bool spare_ok = false;    // its spec's spare_ok
  bool recovering = false;  // its last attempt lost a worker (lost, cordoned, quarantined)
};

// Whether `r` may be placed on spare workers.
inline bool UsesSpares(const GangRequest& r) { return r.spare_ok || r.recovering; }

// Places the request's ranks, each on a worker that matches the selector,
// is not one to avoid, and has max(1, gpus_per_rank) free slots (GPU slots when gpus_per_rank >
// 0) and the CPUs and memory it asks; an elastic job (0 < min_ranks <
// ranks) gets as many ranks as fit, when at least min_ranks do. With
// ranks_per_worker, each worker used takes exactly that many. Otherwise it
// uses the fewest workers: one worker when any can hold the whole job (the
// one with least room that fits, to keep large holes for large jobs), else
// the roomiest workers first. Ranks are numbered by worker order, then slot.
// On workers with domains, PlaceInDomains (domain_placement.h) chooses
// them, and the placement's ranks follow the domains.
// RESOURCE_EXHAUSTED with a person-readable reason when the job does not
// fit.
absl::StatusOr<std::vector<RankPlacement>> PlaceGang(const std::vector<WorkerCapacity>& workers,
                                                     const GangRequest& request);

// `placement` with the workers of its blocks (a worker's consecutive ranks)
// traded between blocks of the same size, so that where it can, a rank
// lands on the worker `holder` names for it: the one whose memory holds its
// own newest snapshot ("" for none), which then need not be fetched, nor
// evicted to make room for another rank. Block by block, each takes the
// worker that holds the most of its ranks' snapshots, from a block that
// has not taken the one it wanted. With `may_trade`, only blocks on two
// workers it allows trade (those of one domain, so that ranks stay in
// domain order).
std::vector<RankPlacement> NearTheirSnapshots(
    std::vector<RankPlacement> placement, const std::function<std::string(int rank)>& holder,
    const std::function<bool(const std::string&, const std::string&)>& may_trade = nullptr);

// Why `ranks` of `request`'s ranks do not fit when `free` matching slots
// are free on `workers` alive workers: "needs 4 free slots, 2 free on 3
// alive workers".
std::string SlotShortfall(const GangRequest& request, int ranks, int64_t free, size_t workers);

// The workers as they would be with nothing running.
std::vector<WorkerCapacity> IdleCapacity(std::vector<WorkerCapacity> workers);

// Why `request` cannot be placed even on an idle cluster of `workers` (too
// large, or no worker has the labels or resources it asks): "needs 32
// slots; the cluster has 24 (waiting for workers to join)". Empty when it
// would fit on the idle cluster.
std::string NeverFits(const std::vector<WorkerCapacity>& workers, const GangRequest& request);

// Takes the slots, CPUs and memory of `placement` out of `workers`, and
// gives them back.
void TakeCapacity(std::vector<WorkerCapacity>& workers, const std::vector<RankPlacement>& placement,
                  const GangRequest& request);
void ReturnCapacity(std::vector<WorkerCapacity>& workers,
                    const std::vector<RankPlacement>& placement, const GangRequest& request);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SCHEDULING_SCHEDULER_H_
