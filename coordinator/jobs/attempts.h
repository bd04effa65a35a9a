// The attempts of jobs, from their start on a placement to their end:
// starting the ranks, stopping them, noting a failure and keeping the most
// telling cause, ending the attempt (a restart after back-off, or FAILED),
// deadlines, start timeouts and hangs (every rank's stacks taken first),
// pre-flight verdicts, preemption, elastic regrowth, and restarts without
// workers that fail or straggle.
//
// Not thread-safe: the JobManager holds it as a member guarded by its
// mutex, and it works on the manager's table, outbox, scheduling views and
// health records, which the same mutex guards.
#ifndef RINGMASTER_COORDINATOR_JOBS_ATTEMPTS_H_
#define RINGMASTER_COORDINATOR_JOBS_ATTEMPTS_H_

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/job_table.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/progress_watch.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/schedulable_worker.h"
#include "coordinator/core/worker_membership.h"
#include "coordinator/health/health_keeper.h"
#include "coordinator/jobs/job_manager_options.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/scheduling/scheduling_views.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// What counts as progress for the job's ranks.
ProgressWatch::Kind WatchKind(const v1::JobSpec& spec);

// The job's root cause: `cause`, in its current attempt.
void SetRootCause(v1::Job* job, const FailureCause& cause);

// SIGTERM to the attempt's ranks on a worker, SIGKILL after the grace.
v1::CoordinatorMessage StopMessage(const std::string& job_id, int attempt, absl::Duration grace);

class Attempts {
 public:
  // What the JobManager keeps, under its mutex, that attempts work on.
  struct Shared {
    JobTable& table;
    Outbox& outbox;
    SchedulingViews& scheduling;
    HealthKeeper& health;
    // Answers to callers (stacks asked for), run after the mutex.
    std::vector<std::function<void()>>& replies;
  };
  Attempts(Shared shared, WorkerMembership* membership, RendezvousStore* rendezvous,
           const Clock* clock, const JobManagerOptions& options);

  // Starting (attempts_start.cc): STARTING on `placement`, the ranks told
  // to start. Stays PENDING, saying why, when no port is free.
  void Start(JobRecord& entry, const std::vector<RankPlacement>& placement,
             const std::vector<SchedulableWorker>& workers);
  // Which two workers a restart's ranks may trade to stay near their
  // snapshots: those in one domain of every level but `host`; null
  // without levels.
  std::function<bool(const std::string&, const std::string&)> SameDomainAboveTheHost(
      const std::vector<SchedulableWorker>& workers) const;
  // Sets job.placed_in: the domains of each topology level `placement`'s
  // ranks are in.
  void RecordPlacedIn(const std::vector<RankPlacement>& placement,
                      const std::vector<SchedulableWorker>& workers, v1::Job& job);
  void SendStart(const JobRecord& entry, int rank);
  // Stops `victim`'s ranks with its preemption grace; it returns to PENDING
  // when they have stopped, without counting a restart.
  void Preempt(JobRecord& victim, const JobRecord& by, int keep_ranks);
  // Elastic: restarts a smaller attempt at full size once room for it has
  // lasted scale_up_after_s.
  void CheckRegrowth(JobRecord& entry, absl::Time now);

  // Failing and restarting (attempts.cc).
  // A failure of the current attempt: keeps the most telling cause and
  // ends the attempt when the cause is decisive or no rank runs on.
  void NoteFailure(JobRecord& entry, FailureCause cause);
  // RESTARTING while restarts remain (and the failure is no repeat without
  // progress), else FAILED; stops the ranks still running either way.
  void End(JobRecord& entry);
  // SIGTERM, then SIGKILL after `grace` (default: --stop-grace).
  void StopRanks(JobRecord& entry, std::optional<absl::Duration> grace = std::nullopt);
  // When the current attempt was first interrupted (a failure noted, its
  // ranks stopped, a rank replaced) and the step it had reached; once per
  // group of the attempt.
  void NoteInterrupted(JobRecord& entry);
  void CheckTimeouts(JobRecord& entry, absl::Time now);
  // FAILED with DEADLINE_EXCEEDED once deadline_s has passed since the
  // first start, whatever the state; true when it ended the job.
  bool CheckDeadline(JobRecord& entry, absl::Time now);
  // RESTARTING jobs whose back-off is over, and whose ranks have stopped,
  // PENDING again.
  void AdvanceRestarts(absl::Time now);

  // Restarts the job from its checkpoint without `workers` (RESTARTING for
  // `reason`, not counted against max_restarts) when the other workers can
  // hold it; false otherwise, with what the job would lack in `short_of`
  // ("needs 4 slots...") or nothing when the transition failed
  // (attempts_health.cc).
  bool ExcludeWorkers(JobRecord& entry, const std::vector<v1::ExcludedWorker>& workers,
                      v1::Reason reason, const std::string& message, std::string* short_of);
  // Names the job's ranks that compute far slower than the others; with
  // on_straggler: exclude, restarts it without a new straggler's worker
  // where the job can do without it.
  void UpdateStragglers(JobRecord& entry, absl::Time now);
  // Once every rank of the attempt has posted its pre-flight report, the
  // verdict: "go", or the attempt placed again without the workers of
  // ranks that failed or were slow (attempts_preflight.cc).
  void CheckPreflight(JobRecord& entry);

  // Replacing a failed rank alone (attempts_regroup.cc): the other ranks
  // of a RUNNING built-in trainer attempt keep their processes and form the
  // attempt's group again with the failed rank's replacement, started in
  // its slot, which restores from a snapshot (docs/checkpoints.md). True
  // when it did; false when the failure is for NoteFailure (regroups off,
  // snapshots off, a regroup under way, a rank not seen to exit, no
  // restart left).
  bool ReplaceRank(JobRecord& entry, int rank, const FailureCause& cause);
  // For the ranks `named` of a RUNNING elastic built-in trainer attempt,
  // each of a worker that is lost or takes no rank again: every rank of
  // those workers leaves, and the others keep their processes and form a
  // smaller group without them, at no fewer than min_ranks and in whole
  // ranks_per_worker (docs/checkpoints.md). True when they did; false when
  // the failure is for NoteFailure.
  bool ShrinkGroup(JobRecord& entry, const std::vector<int>& named, const FailureCause& cause);
  // The first member's report in the new group ends the regroup; past
  // --regroup-timeout without one the attempt fails, restarting every rank.
  void OnGroupReport(JobRecord& entry, const v1::Progress& progress);
  // Sets group `generation` of the job's attempt in its rendezvous scope,
  // which the ranks waiting for it read (domain/group_generation.h).
  absl::Status AnnounceGroup(const v1::Job& job, int generation);
  void CheckRegroup(JobRecord& entry, absl::Time now);
  // Whether a rank of `job` may start again on `worker_id`: it is not
  // excluded for the job, nor cordoned.
  bool MayKeepSlot(const v1::Job& job, const std::string& worker_id);
  // Whether the attempt may form its group again rather than restart
  // every rank: regroups and snapshots on, a RUNNING trainer, no regroup
  // or failure under way, a restart left.
  bool MayRegroup(const JobRecord& entry);
  // The bookkeeping of group `generation`'s forming for `cause`: the
  // interruption, a restart counted, its root cause, goodput's restart
  // phase.
  void BeginRegroup(JobRecord& entry, int generation, const FailureCause& cause);

  // Stacks (attempts_stacks.cc).
  // Asks the workers of the attempt for its ranks' stacks, unless that is
  // under way; with `hang`, the failure is noted once they are in.
  void RequestStacks(JobRecord& entry, const std::string& why, std::optional<FailureCause> hang);
  void OnStacksDumped(const std::string& worker_id, const v1::StacksDumped& dumped);
  // Sets the job's StacksReport from what came, answers those waiting, and
  // notes a hang's failure.
  void FinishStacks(JobRecord& entry);
  static constexpr absl::Duration kStacksWait = absl::Seconds(10);

 private:
  void Send(const std::string& worker_id, v1::CoordinatorMessage message) {
    outbox_.Send(worker_id, std::move(message));
  }
  // Restarts the job without `straggler`'s worker, and says so in its
  // history; false, with a note that says why, when the others cannot
  // hold it.
  bool ExcludeStraggler(JobRecord& entry, const v1::Straggler& straggler, const std::string& line);

  JobTable& table_;
  Outbox& outbox_;
  SchedulingViews& scheduling_;
  HealthKeeper& health_;
  std::vector<std::function<void()>>& replies_;
  WorkerMembership* const membership_;
  RendezvousStore* const rendezvous_;
  const Clock* const clock_;
  const JobManagerOptions& options_;
  std::mt19937_64 rng_;  // back-off jitter
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOBS_ATTEMPTS_H_
