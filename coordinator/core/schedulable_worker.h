// A worker as the scheduler sees it, and what the ranks it reports hold:
// the model the scheduler and the health checks read, apart from
// WorkerMembership, which keeps it.
#ifndef RINGMASTER_COORDINATOR_CORE_SCHEDULABLE_WORKER_H_
#define RINGMASTER_COORDINATOR_CORE_SCHEDULABLE_WORKER_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// What the rank processes a worker reports hold, by job.
struct ReportedRanks {
  struct Job {
    std::string job_id;
    std::vector<int> slots;  // a GPU rank holds the slot of each of its GPUs
    int cpus = 0;
    int64_t memory_mb = 0;
  };
  std::vector<Job> jobs;
};

// Appends to `slots` the slot of each of `gpus` on a worker whose slot i
// is GPU gpu_indices[i]; a GPU it does not have is left out.
template <typename Gpus>
void AppendGpuSlots(const Gpus& gpus, const std::vector<int>& gpu_indices,
                    std::vector<int>* slots) {
  for (int gpu : gpus) {
    auto at = std::find(gpu_indices.begin(), gpu_indices.end(), gpu);
    if (at != gpu_indices.end()) slots->push_back(static_cast<int>(at - gpu_indices.begin()));
  }
}

// What `ranks` hold on a worker whose slot i is GPU gpu_indices[i].
ReportedRanks Report(const std::vector<const v1::RunningRank*>& ranks,
                     const std::vector<int>& gpu_indices);

// A worker's domain at each topology level, widest first: few levels, kept
// inline, since every scheduling pass copies every worker's.
using TopologyDomains = absl::InlinedVector<int, 4>;

// A worker as the scheduler sees it: ALIVE, connected and admitted.
struct SchedulableWorker {
  std::string worker_id;
  std::string incarnation;
  int slots = 0;
  std::vector<int> gpu_indices;  // per slot; empty for a CPU worker
  // Its latest report, which every snapshot until the next shares. Never
  // null.
  std::shared_ptr<const ReportedRanks> running = std::make_shared<const ReportedRanks>();
  std::map<std::string, std::string> labels;
  int cpus = 0;           // 0: not counted
  int64_t memory_mb = 0;  // 0: not counted
  // Its domain at each topology level, widest first (WorkerMembership's
  // ids); -1 where it has no value. Empty without --topology-levels.
  TopologyDomains domains;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_SCHEDULABLE_WORKER_H_
