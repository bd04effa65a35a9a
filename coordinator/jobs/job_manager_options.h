// What a JobManager is configured with: the coordinator's flags that shape
// how jobs are stopped, restarted, queued, kept and checked.
#ifndef RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_OPTIONS_H_
#define RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_OPTIONS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/core/rank_env.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/straggler_watch.h"
#include "coordinator/health/worker_health.h"
#include "coordinator/scheduling/queue_scheduler.h"
#include "domain/queue_config.h"
#include "domain/spec_validation.h"
#include "proto/job.pb.h"

namespace ringmaster {

struct JobManagerOptions {
  absl::Duration stop_grace = absl::Seconds(10);  // SIGTERM to SIGKILL
  BackoffOptions backoff;
  // A plain non-zero exit waits this long for a more telling cause (a
  // signal, a lost worker) before it ends the attempt, unless every rank
  // has ended by then.
  absl::Duration failure_settle = absl::Seconds(1);
  RankEnvContext rank_env;
  // Where a spec's checkpoint_dir may lie (rank_env.checkpoint_dir, the
  // default root, always may).
  std::vector<std::string> checkpoint_roots;
  SpecLimits spec_limits;
  // Queues, priorities and preemption (SetQueues replaces the queues).
  QueueConfig queues = DefaultQueueConfig();
  // A user's PENDING jobs at most, in every queue together (a queue's
  // max_pending_jobs_per_user bounds them there too); 0: no limit. The
  // admin's are not counted.
  int max_pending_jobs_per_user = 1000;
  SchedulingPolicy scheduling;
  // Ended jobs are deleted this long after they ended, and beyond this many
  // (the oldest first).
  absl::Duration retain_finished = absl::Hours(24 * 7);
  int retain_finished_jobs = 10000;
  // Quarantine of workers that fail the ranks of several jobs.
  HealthOptions health;
  StragglerOptions stragglers;
  // Whether a job whose spec leaves `preflight` unset runs the check.
  bool preflight_default = false;
  // Watchers (WatchJob, WatchJobs) called on a thread of their own rather
  // than by the call that made the change (Outbox).
  bool watchers_in_background = false;
  // Uniform in [0, 1), for back-off jitter; empty: a random generator.
  std::function<double()> random;
  // Called under the manager's mutex after each stored transition, with the
  // job as it was before it; must only record (metrics).
  std::function<void(const v1::Job& before, const v1::StateChange& change)> on_transition;
  // Called, instead of exiting, when the store refuses a commit (with a
  // shared store: another coordinator leads). It must not return.
  std::function<void(const absl::Status&)> on_store_lost;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_OPTIONS_H_
