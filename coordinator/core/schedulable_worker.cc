#include "coordinator/core/schedulable_worker.h"

namespace ringmaster {

ReportedRanks Report(const std::vector<const v1::RunningRank*>& ranks,
                     const std::vector<int>& gpu_indices) {
  ReportedRanks report;
  for (const v1::RunningRank* r : ranks) {
    if (report.jobs.empty() || report.jobs.back().job_id != r->rank().job_id()) {
      report.jobs.push_back({r->rank().job_id()});
    }
    ReportedRanks::Job& job = report.jobs.back();
    if (r->gpus().empty()) job.slots.push_back(r->slot());
    AppendGpuSlots(r->gpus(), gpu_indices, &job.slots);
    job.cpus += r->cpus();
    job.memory_mb += r->memory_mb();
  }
  return report;
}

}  // namespace ringmaster
