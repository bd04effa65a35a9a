// Jobs from submission to their end: the API's calls, the workers'
// streams and the tick. It owns the in-memory view of every job (JobTable),
// which stores each transition before anything acts on it, and under one
// mutex the parts that decide about them: SchedulingViews (where pending
// jobs go), HealthKeeper (which workers take ranks), Attempts (starting,
// failing, restarting) and RankEvents (what the workers report). Which
// workers exist is WorkerMembership's; this class asks it.
#ifndef RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_H_
#define RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

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
#include "coordinator/core/worker_link.h"
#include "coordinator/core/worker_membership.h"
#include "coordinator/health/health_keeper.h"
#include "coordinator/jobs/attempts.h"
#include "coordinator/jobs/job_manager_options.h"
#include "coordinator/jobs/rank_events.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "coordinator/scheduling/domain_placement.h"
#include "coordinator/scheduling/scheduling_views.h"
#include "domain/queue_config.h"
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
  // The watchers' last calls are made while everything they read is here.
  ~JobManager() override { outbox_.StopBackground(); }

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
  // The job's progress over its run while it is held in memory (active or
  // just ended); none once retired. NOT_FOUND for no such job.
  absl::StatusOr<v1::JobProgress> Progress(const std::string& job_id);
  // Newest first: up to page_size jobs matching `query`.
  absl::StatusOr<JobPage> ListPage(const JobQuery& query);
  // How many jobs are in each state, ended ones included.
  std::map<v1::JobState, int> CountByState();
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  // A PENDING job held (`by` its owner or the admin) is not scheduled until
  // it is released; FAILED_PRECONDITION for a job in another state. Each
  // change is said in the job's history.
  absl::StatusOr<v1::Job> Hold(const std::string& job_id, const std::string& by);
  absl::StatusOr<v1::Job> Release(const std::string& job_id, const std::string& by);
  // A PENDING job's priority (a class or an integer), admitted as at submit
  // for `by`: a class the job's queue lets a user name, anything for the
  // admin.
  absl::StatusOr<v1::Job> SetPriority(const std::string& job_id, const std::string& priority,
                                      const std::string& by);
  // An ended job, whose ranks are all stopped, back to PENDING for a new
  // attempt of the same id (so the same uid, and its own checkpoints); its
  // restarts count from 0 again.
  absl::StatusOr<v1::Job> Requeue(const std::string& job_id, const std::string& by);
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
  // Each topology domain's slots, free and in all, on the schedulable
  // workers now.
  std::vector<DomainGauge> DomainGauges();
  // --topology-levels, widest first.
  const std::vector<std::string>& TopologyLevels() const {
    return options_.scheduling.topology_levels;
  }
  // Each rank of a RUNNING job with a compute figure (HealthKeeper).
  std::vector<RankSlowdown> Slowdowns();
  // Each resident job that has started, with its goodput as of now.
  std::vector<std::pair<std::string, v1::Goodput>> Goodputs();

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
  static constexpr absl::Duration kStacksWait = Attempts::kStacksWait;

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
  // A built-in trainer rank of the attempt lost a peer and waits for its
  // group to form again: when a rank of the attempt is on a worker whose
  // stream broke, that worker is taken as lost and every rank restarts now
  // (as a survivor's exit did), rather than after --worker-grace.
  void OnPeerLost(const std::string& job_id, int attempt, int generation, int rank,
                  const std::string& why);

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
  // Where a job of `spec` submitted by `owner` resumes from: the checkpoint
  // directory of ended job spec.resume_from, when `owner` owns it or is the
  // admin; refused naming the field otherwise.
  absl::StatusOr<std::string> ResumeFromDirLocked(const v1::JobSpec& spec, const std::string& owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a change of a PENDING job says in its history; no reason: nothing
  // changed.
  struct PendingChange {
    v1::Reason reason = v1::REASON_UNSPECIFIED;
    std::string message;
  };
  // Applies `change` to PENDING job `job_id` (refused naming `act` for a
  // job in another state), stores it with its note, and has the scheduler
  // read the job again.
  absl::StatusOr<v1::Job> ChangePending(
      const std::string& job_id, absl::string_view act,
      const std::function<absl::StatusOr<PendingChange>(v1::Job&, const QueueConfig&)>& change)
      ABSL_LOCKS_EXCLUDED(mu_);
  void TickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeleteLocked(RetiredJob job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes ended jobs past the retention (job_manager.cc).
  void PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Runs the replies queued under mu_; called after releasing it.
  void RunReplies();

  // Scheduling (job_manager_schedule.cc): starts and preempts what a pass
  // of scheduling_ decides.
  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  RendezvousStore* const rendezvous_;
  WorkerMembership* const membership_;
  const Clock* const clock_;
  const JobManagerOptions options_;
  // Every public call that changes jobs flushes it after releasing mu_.
  Outbox outbox_;

  Mutex mu_;
  JobTable table_ ABSL_GUARDED_BY(mu_);
  const std::string run_id_;  // this run of the coordinator, in resume tokens
  absl::Time next_prune_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  SchedulingViews scheduling_ ABSL_GUARDED_BY(mu_);
  int64_t lists_seen_ ABSL_GUARDED_BY(mu_) = 0;  // WorkerMembership::ListsChangedSince
  HealthKeeper health_ ABSL_GUARDED_BY(mu_);
  // Answers to callers (DumpStacks) made under mu_, run after it.
  std::vector<std::function<void()>> replies_ ABSL_GUARDED_BY(mu_);
  Attempts attempts_ ABSL_GUARDED_BY(mu_);
  RankEvents events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_H_
