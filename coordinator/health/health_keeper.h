// The health of the workers as the coordinator keeps it: cordons and
// drains set by people, quarantines of workers that fail the ranks of
// several jobs (HealthRecords), GPU errors, and the figures of ranks that
// compute slower than their job's others. Each change is stored before it
// is acted on. What it means for a job (a restart elsewhere) is the
// JobManager's.
#ifndef RINGMASTER_COORDINATOR_HEALTH_HEALTH_KEEPER_H_
#define RINGMASTER_COORDINATOR_HEALTH_HEALTH_KEEPER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/job_store.h"
#include "coordinator/core/job_table.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/schedulable_worker.h"
#include "coordinator/core/straggler_watch.h"
#include "coordinator/core/worker_membership.h"
#include "coordinator/health/worker_health.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {

// INVALID_ARGUMENT when a cordon's or drain's reason is too long to keep.
absl::Status CheckCordonReason(const std::string& reason);

// Not thread-safe: the JobManager keeps it under its own mutex.
class HealthKeeper {
 public:
  HealthKeeper(JobStore* store, WorkerMembership* membership, const Clock* clock,
               HealthOptions options)
      : store_(store), membership_(membership), clock_(clock), records_(std::move(options)) {}

  // The records stored before.
  void Load(const std::vector<v1::WorkerHealth>& records) { records_.Load(records); }

  // The schedulable workers that are not cordoned.
  std::vector<SchedulableWorker> Schedulable();
  // Cordoned: by an XID, a quarantine or the admin.
  bool Cordoned(const std::string& worker_id) const { return records_.Cordoned(worker_id); }
  // Every worker, with its health and the slots `table`'s ranks use on it.
  std::vector<v1::Worker> List(const JobTable& table);
  // The worker as List shows it; NOT_FOUND for one never seen.
  absl::StatusOr<v1::Worker> Worker(const JobTable& table, const std::string& worker_id);

  // Cordons the worker (by `by`, "admin"), stored.
  void Cordon(const std::string& worker_id, const std::string& reason, const std::string& by,
              bool drained);
  // Schedulable again; failures blamed on it are forgotten.
  void Uncordon(const std::string& worker_id);
  // Blames the worker the attempt's failure `cause` points at (BlameOf):
  // may quarantine it, and makes the job avoid a worker where its ranks
  // failed twice. A job at fault itself says so in `cause`. True when the
  // job's next attempt avoids that worker now.
  bool Blame(JobRecord& entry, FailureCause& cause);
  // A GPU error the worker reported: recorded, and a broken GPU cordons it.
  void OnGpuError(const std::string& worker_id, const v1::GpuError& error);
  // Quarantines whose time is up end, on probation.
  void Expire();

 private:
  void Store(const std::vector<v1::WorkerHealth>& records);

  JobStore* const store_;
  WorkerMembership* const membership_;
  const Clock* const clock_;
  HealthRecords records_;
};

// The RUNNING job's ranks that compute far slower than its others, from
// their latest reports; sets entry.slowdown to each rank's ratio to the
// job's median.
std::vector<v1::Straggler> FlagStragglers(JobRecord& entry, absl::Time now,
                                          const StragglerOptions& options);

// Each rank of a RUNNING job with a compute figure: its ratio to the job's
// median (for ringmaster_rank_slowdown_ratio).
struct RankSlowdown {
  std::string job_id;
  int rank = 0;
  std::string worker_id;
  double ratio = 0;
};
std::vector<RankSlowdown> Slowdowns(const JobTable& table);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_HEALTH_HEALTH_KEEPER_H_
