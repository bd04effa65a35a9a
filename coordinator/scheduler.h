// Gang scheduling: a job's ranks are placed all at once or not at all,
// packed onto as few workers as possible. Pure functions over a snapshot of
// capacity, so the policy is tested without daemons.
#ifndef RINGMASTER_COORDINATOR_SCHEDULER_H_
#define RINGMASTER_COORDINATOR_SCHEDULER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/worker_membership.h"

namespace ringmaster {

// What one alive worker can offer now. Workers are listed in a stable order
// (registration order); rank order follows it.
struct WorkerCapacity {
  std::string worker_id;
  int total_slots = 0;
  std::vector<int> free_slots;  // ascending slot indices
  bool gpu_slots = false;       // each slot is one GPU
};

// A slot (or the GPUs) a placed rank holds.
struct HeldSlots {
  std::string worker_id;
  int slot = 0;
  std::vector<int> gpus;  // GPU indices; a GPU rank holds the slot of each
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
};

// Places `ranks` ranks, each needing max(1, gpus_per_rank) slots (GPU slots
// when gpus_per_rank > 0); an elastic job (0 < min_ranks < ranks) gets as
// many ranks as fit, when at least min_ranks do. Uses the fewest workers: one worker when any can
// hold the whole job (the one with least room that fits, to keep large
// holes for large jobs), else the roomiest workers first. Ranks are numbered
// by worker order, then slot. RESOURCE_EXHAUSTED with a person-readable
// reason when the job does not fit.
absl::StatusOr<std::vector<RankPlacement>> PlaceGang(
    const std::vector<WorkerCapacity>& workers, int ranks, int gpus_per_rank,
    int min_ranks = 0);

struct QueuedJob {
  std::string job_id;
  int ranks = 0;
  int gpus_per_rank = 0;
  int min_ranks = 0;  // 0: ranks
};

struct ScheduleResult {
  std::map<std::string, std::vector<RankPlacement>> placed;
  std::map<std::string, std::string> waiting;  // job id -> why it waits
};

// Strict FIFO over `queue` (oldest first): the first job that does not fit
// blocks those behind it, so large jobs are not starved by small ones. A job
// larger than the whole cluster cannot block the queue; it waits with that
// reason.
ScheduleResult Schedule(const std::vector<QueuedJob>& queue,
                        std::vector<WorkerCapacity> workers);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SCHEDULER_H_
