// The coordinator's core: jobs from submission to their end. It owns the
// in-memory view of every job, stores each transition before acting on it,
// places jobs with the scheduler, tells workers to start and stop ranks,
// reacts to rank events and lost workers, ends attempts that do not start,
// hang or lose a worker, restarts them with jittered back-off, and regrows
// elastic jobs. Which workers exist and whether they are healthy is
// WorkerMembership's; this class asks it.
#ifndef RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_H_
#define RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_H_

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/credentials.h"
#include "common/mutex.h"
#include "coordinator/core/attempt_placement.h"
#include "coordinator/core/job_query.h"
#include "coordinator/core/job_store.h"
#include "coordinator/core/job_table.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/progress_watch.h"
#include "coordinator/core/rank_env.h"
#include "coordinator/core/reconcile.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/worker_link.h"
#include "coordinator/core/worker_membership.h"
#include "coordinator/health/health_keeper.h"
#include "coordinator/health/worker_health.h"
#include "coordinator/jobs/job_manager_options.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "coordinator/scheduling/queue_scheduler.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/scheduling/scheduling_views.h"
#include "domain/job_state.h"
#include "domain/queue_config.h"
#include "domain/spec_validation.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Thread-safe: one mutex guards all job state. Called by the gRPC handlers
// (any thread) and by a timer thread (Tick). While holding its mutex it
// calls into WorkerMembership (whose mutex comes after this one) and writes
// to the job store without waiting for the disk; what it does about a
// change (messages to workers, snapshots to watchers, its reply) waits for
// the store's sync, which runs after the mutex is released (Outbox).
class JobManager final : public JobLogIndex {
 public:
  using JobObserver = std::function<void(const v1::Job&)>;

  JobManager(JobStore* store, RendezvousStore* rendezvous, WorkerMembership* membership,
             const Clock* clock, JobManagerOptions options);

  // Loads stored jobs. Workers that ran active ranks are expected back
  // within the heartbeat timeout; ranks not reported by then are lost.
  absl::Status Recover();

  // A new job's id, the job owned by `owner`. With a request id, a retried
  // submission of the same owner is answered with the job the first one
  // made (while that job is stored) when the specs are the same, and
  // ALREADY_EXISTS when they differ.
  absl::StatusOr<std::string> Submit(v1::JobSpec spec, const std::string& request_id = "",
                                     const std::string& owner = std::string(kAdminUser));
  absl::StatusOr<v1::Job> Get(const std::string& job_id) override;
  // Newest first: up to page_size jobs matching `query`.
  absl::StatusOr<JobPage> ListPage(const JobQuery& query);
  // How many jobs are in each state, ended ones included.
  std::map<v1::JobState, int> CountByState();
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  // Forgets an ended job: its stored history, and (by telling the connected
  // workers) its ranks' logs. FAILED_PRECONDITION while it is active.
  absl::Status Delete(const std::string& job_id);
  // Calls `observer` with the current snapshot, then after every change;
  // the id is 0 when the job has ended (one call, nothing to unwatch).
  absl::StatusOr<int64_t> Watch(const std::string& job_id, JobObserver observer);
  void Unwatch(int64_t watch_id);
  // Every job: with an empty `resume_token`, each job in memory (those
  // active and those just ended) oldest change first; with the token of a
  // job snapshot this coordinator gave (ResumeToken), each job changed
  // since, at its latest. Then every change of any job, in revision order.
  // OUT_OF_RANGE when the token is too old, or of an earlier run of the
  // coordinator: the watcher starts again without one. Deleted jobs are not
  // announced.
  absl::StatusOr<int64_t> WatchAll(const std::string& resume_token, JobObserver observer);
  // Where a watcher that has seen `job` goes on from.
  std::string ResumeToken(const v1::Job& job) const;
  // Where the logs of the ranks of `job`'s `attempt` can be read (a
  // worker's address as it is now, if it is connected). NOT_FOUND as
  // AttemptRanks.
  absl::StatusOr<std::vector<RankLogSource>> LogSources(const v1::Job& job, int attempt) override;

  // Every worker, with its health (cordon, failures blamed on it).
  std::vector<v1::Worker> ListWorkers();
  // Each rank of a RUNNING job with a compute figure (HealthKeeper).
  std::vector<RankSlowdown> Slowdowns();

  // Cordons and drains (job_manager_health.cc), by `by` ("admin"):
  // stored before they return. NOT_FOUND for a worker never seen.
  // Cordon: the worker takes no new ranks.
  absl::StatusOr<v1::Worker> Cordon(const std::string& worker_id, const std::string& reason,
                                    const std::string& by);
  // Schedulable again; failures blamed on it are forgotten.
  absl::StatusOr<v1::Worker> Uncordon(const std::string& worker_id);
  // Cordons the worker, then stops every attempt with ranks on it (SIGTERM,
  // SIGKILL after `grace`): each job goes to RESTARTING (WORKER_DRAINED)
  // and is placed again elsewhere, without counting a restart.
  absl::StatusOr<v1::DrainWorkerResponse> Drain(const std::string& worker_id,
                                                const std::string& reason, const std::string& by,
                                                absl::Duration grace);

  // Replaces the queues (as SIGHUP rereads --queues). Jobs of a queue no
  // longer listed are scheduled in the default queue; their priority,
  // fixed at submit, stays.
  void SetQueues(QueueConfig queues);
  // Each queue and what it held at the last scheduling pass, and the
  // priority classes.
  v1::ListQueuesResponse ListQueues();
  // The code archives (CodePackage.sha256) of the jobs not yet ended.
  std::set<std::string> CodeInUse();

  // Takes the stacks of every rank of the job's running attempt into their
  // logs (job_manager_stacks.cc); `done` gets where each rank is, once
  // every worker has answered or after kStacksWait. FAILED_PRECONDITION
  // when no attempt runs. `done` runs on no lock of the manager's.
  using StacksDone = std::function<void(const absl::StatusOr<v1::StacksReport>&)>;
  void DumpStacks(const std::string& job_id, StacksDone done);
  static constexpr absl::Duration kStacksWait = absl::Seconds(10);

  // The worker streams. RegisterWorker opens a session for `link` (see
  // WorkerMembership::Register for refusals), applies the events the worker
  // still holds, reconciles the ranks it runs with those placed on it, and
  // only then makes it schedulable. *ack is the highest event number to
  // acknowledge (0: none).
  absl::StatusOr<WorkerSession> RegisterWorker(WorkerLink* link, const v1::RegisterWorker& request,
                                               int64_t* ack);
  // A rank event, or a GPU error; returns its number when it is to be
  // acknowledged, else 0.
  int64_t OnRankEvent(const WorkerSession& session, const v1::WorkerMessage& message);
  // False when the session has ended (the stream should close).
  bool OnHeartbeat(const WorkerSession& session, const v1::Heartbeat& beat);

  // Worker health, timeouts, hangs, restart back-off, elastic regrowth,
  // scheduling and (once a minute) pruning of ended jobs; called
  // periodically. Jobs are placed here only, a tick's worth at a time, so
  // that submitting and rank events do not pay for a pass over every
  // worker.
  void Tick();

 private:
  // Where a spec's checkpoint_dir may lie: options_.checkpoint_roots and
  // the default root.
  std::vector<std::string> CheckpointRoots() const;
  // RESOURCE_EXHAUSTED, naming the limit, when `owner` has as many jobs
  // waiting as it may, in `queue` or in all.
  absl::Status CheckPendingLimitsLocked(const std::string& owner, const std::string& queue) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeleteLocked(RetiredJob job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes ended jobs past the retention (job_manager.cc).
  void PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Queues a message for the worker, sent once what led to it is stored.
  void SendLocked(const std::string& worker_id, v1::CoordinatorMessage message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    outbox_.Send(worker_id, std::move(message));
  }

  // Stacks (job_manager_stacks.cc).
  // Asks the workers of the attempt for its ranks' stacks, unless that is
  // under way; with `hang`, the failure is noted once they are in.
  void RequestStacksLocked(JobRecord& entry, const std::string& why,
                           std::optional<FailureCause> hang) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStacksDumpedLocked(const std::string& worker_id, const v1::StacksDumped& dumped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the job's StacksReport from what came, answers those waiting, and
  // notes a hang's failure.
  void FinishStacksLocked(JobRecord& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the replies queued under mu_; called after releasing it.
  void RunReplies();

  // Worker health for jobs (job_manager_health.cc).
  // Names the job's ranks that compute far slower than the others, from
  // their latest reports; with on_straggler: exclude, restarts it without
  // a new straggler's worker where the job can do without it.
  void UpdateStragglersLocked(JobRecord& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restarts the job from its checkpoint without `straggler`'s worker, and
  // says so in its history; false, with a note that says why, when the
  // other workers cannot hold it.
  bool ExcludeStragglerLocked(JobRecord& entry, const v1::Straggler& straggler,
                              const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restarts the job from its checkpoint without `workers` (RESTARTING for
  // `reason`, not counted against max_restarts) when the other workers can
  // hold it; false otherwise, with what the job would lack in `short_of`
  // ("needs 4 slots...") or nothing when the transition failed.
  bool ExcludeWorkersLocked(JobRecord& entry, const std::vector<v1::ExcludedWorker>& workers,
                            v1::Reason reason, const std::string& message, std::string* short_of)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pre-flight (job_manager_preflight.cc): once every rank of the attempt
  // has posted its report, the verdict: "go", or the attempt placed again
  // without the workers of ranks that failed or were slow.
  void CheckPreflightLocked(JobRecord& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Scheduling (job_manager_schedule.cc): acting on what a pass of
  // scheduling_ decides.
  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Free slots of `workers`, leaving out the ranks of `except`.
  std::vector<WorkerCapacity> CapacityLocked(const std::vector<SchedulableWorker>& workers,
                                             const std::string& except = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartAttemptLocked(JobRecord& entry, const std::vector<RankPlacement>& placement,
                          const std::vector<SchedulableWorker>& workers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendStartLocked(const JobRecord& entry, int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops `victim`'s ranks with its preemption grace; it returns to PENDING
  // when they have stopped, without counting a restart.
  void PreemptLocked(JobRecord& victim, const JobRecord& by, int keep_ranks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: restarts a smaller attempt at full size once room for it has
  // lasted scale_up_after_s.
  void CheckRegrowthLocked(JobRecord& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Failing and restarting attempts.
  // A failure of the current attempt: keeps the most telling cause and
  // ends the attempt when the cause is decisive or no rank runs on.
  void NoteFailureLocked(JobRecord& entry, FailureCause cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESTARTING while restarts remain (and the failure is no repeat without
  // progress), else FAILED; stops the ranks still running either way.
  void EndAttemptLocked(JobRecord& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SIGTERM, then SIGKILL after `grace` (default: --stop-grace).
  void StopRanksLocked(JobRecord& entry, std::optional<absl::Duration> grace = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SIGTERM to the attempt's ranks on a worker, SIGKILL after the grace.
  v1::CoordinatorMessage StopMessage(const std::string& job_id, int attempt,
                                     absl::Duration grace) const;
  void CheckTimeoutsLocked(JobRecord& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED with DEADLINE_EXCEEDED once deadline_s has passed since the
  // first start, whatever the state; true when it ended the job.
  bool CheckDeadlineLocked(JobRecord& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdvanceRestartsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Worker events (job_manager_workers.cc).
  // A RUNNING rank its worker's reports no longer list ended there and its
  // exit was lost: after kReportsBeforeQuery reports without it the exit is
  // asked for again, after kReportsBeforeLost the rank is RANK_LOST.
  void CheckRanksReportedLocked(JobRecord& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr int kReportsBeforeQuery = 2;
  static constexpr int kReportsBeforeLost = 4;
  void ReconcileLocked(const WorkerSession& session, const v1::RegisterWorker& request,
                       int64_t* ack) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeartbeatLocked(const WorkerSession& session, const v1::Heartbeat& beat)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyRankEventLocked(const std::string& worker_id, const v1::WorkerMessage& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRankStartedLocked(const std::string& worker_id, const v1::RankStarted& started)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRankExitedLocked(const std::string& worker_id, const v1::RankExited& exited)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank of the current attempt ended (or was lost): update the job.
  void OnRankEndedLocked(JobRecord& entry, int rank, const FailureCause& cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWorkerLostLocked(const LostWorker& lost) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finds jobs in the table; to be called only while holding mu_.
  JobLookup FindJobLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  RendezvousStore* const rendezvous_;
  WorkerMembership* const membership_;
  const Clock* const clock_;
  const JobManagerOptions options_;
  // Every public call that changes jobs flushes it after releasing mu_.
  Outbox outbox_;

  Mutex mu_;
  JobTable table_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);  // back-off jitter
  const std::string run_id_;                  // this run of the coordinator, in resume tokens
  absl::Time next_prune_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  SchedulingViews scheduling_ ABSL_GUARDED_BY(mu_);
  int64_t lists_seen_ ABSL_GUARDED_BY(mu_) = 0;  // WorkerMembership::ListsChangedSince
  HealthKeeper health_ ABSL_GUARDED_BY(mu_);
  // Answers to callers (DumpStacks) made under mu_, run after it.
  std::vector<std::function<void()>> replies_ ABSL_GUARDED_BY(mu_);
};

// What counts as progress for the job's ranks.
ProgressWatch::Kind WatchKind(const v1::JobSpec& spec);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_H_
