// The coordinator's core: jobs from submission to their end. It owns the
// in-memory view of every job, stores each transition before acting on it,
// places jobs with the scheduler, tells workers to start and stop ranks,
// reacts to rank exits and lost workers, and restarts failed attempts with
// exponential back-off.
#ifndef RINGMASTER_COORDINATOR_JOB_MANAGER_H_
#define RINGMASTER_COORDINATOR_JOB_MANAGER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/job_store.h"
#include "coordinator/rank_env.h"
#include "coordinator/rendezvous_store.h"
#include "coordinator/scheduler.h"
#include "coordinator/worker_link.h"
#include "coordinator/worker_registry.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

struct JobManagerOptions {
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  absl::Duration stop_grace = absl::Seconds(10);  // SIGTERM to SIGKILL
  absl::Duration restart_backoff_initial = absl::Seconds(1);
  absl::Duration restart_backoff_max = absl::Seconds(60);
  RankEnvContext rank_env;
  std::string trainer_program = "ringmaster-trainer";
  // Called under the manager's mutex after each stored transition, with the
  // job as it was before it; must only record (metrics).
  std::function<void(const v1::Job& before, const v1::StateChange& change)> on_transition;
};

// Where one rank's log can be read.
struct RankLogSource {
  int rank = 0;
  std::string worker_address;
};

// Thread-safe: one mutex guards all state. Called by the gRPC handlers (any
// thread) and by a timer thread (Tick). Calls into WorkerLink::Send and job
// observers happen under the mutex; both must only queue work.
class JobManager {
 public:
  using JobObserver = std::function<void(const v1::Job&)>;

  JobManager(JobStore* store, RendezvousStore* rendezvous, const Clock* clock,
             JobManagerOptions options);

  // Loads stored jobs. Workers that ran active ranks are expected back
  // within the heartbeat timeout; ranks not reported by then are lost.
  absl::Status Recover();

  absl::StatusOr<std::string> Submit(v1::JobSpec spec);
  absl::StatusOr<v1::Job> Get(const std::string& job_id);
  std::vector<v1::Job> List();
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  // Calls `observer` with the current snapshot, then after every change.
  absl::StatusOr<int64_t> Watch(const std::string& job_id, JobObserver observer);
  void Unwatch(int64_t watch_id);
  absl::StatusOr<std::vector<RankLogSource>> LogSources(const std::string& job_id);

  std::vector<v1::Worker> ListWorkers();

  // The worker stream: Register must be the first message on a link.
  absl::Status OnWorkerMessage(WorkerLink* link, const v1::WorkerMessage& message);
  void OnWorkerDisconnected(WorkerLink* link);

  // Health checks, restart back-off and scheduling; called periodically.
  void Tick();

 private:
  struct JobEntry {
    v1::Job job;
    absl::Time restart_at;  // while RESTARTING
    std::map<int, v1::Progress> rank_progress;
  };
  struct Watcher {
    std::string job_id;
    JobObserver observer;
  };

  // Stores the transition and its reason, then applies it in memory. The
  // caller acts on it only when this returns OK.
  absl::Status Transition(JobEntry& entry, v1::JobState to, v1::Reason reason,
                          const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Persist(JobEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const JobEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<WorkerCapacity> CapacityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartAttempt(JobEntry& entry, const std::vector<RankPlacement>& placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the attempt after a failure: RESTARTING while restarts remain,
  // else FAILED. Stops the ranks still running either way.
  void FailAttempt(JobEntry& entry, v1::Reason reason, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopRanks(JobEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdvanceRestarts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnRegister(WorkerLink* link, const v1::RegisterWorker& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnHeartbeat(const std::string& worker_id, const v1::Heartbeat& beat)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRankStarted(const v1::RankStarted& started)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRankExited(const v1::RankExited& exited) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a rank's report and recomputes the job's progress.
  void ApplyProgress(JobEntry& entry, int rank, const v1::Progress& progress)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank of the current attempt ended (or was lost): update the job.
  void OnRankEnded(JobEntry& entry, int rank, v1::Reason reason,
                   const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWorkerLost(const std::string& worker_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The rank `ref` names, when it belongs to the job's current attempt.
  v1::RankStatus* FindRank(const v1::RankRef& ref, JobEntry** entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::StartRank MakeStartRank(const JobEntry& entry, int rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  RendezvousStore* const rendezvous_;
  const Clock* const clock_;
  const JobManagerOptions options_;

  absl::Mutex mu_;
  std::map<std::string, JobEntry> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> job_order_ ABSL_GUARDED_BY(mu_);  // submission order
  WorkerRegistry registry_ ABSL_GUARDED_BY(mu_);
  std::map<const WorkerLink*, std::string> link_workers_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  int64_t next_watch_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// True while a rank holds its slot: placed and not yet reported ended.
bool RankHoldsSlot(const v1::RankStatus& rank);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOB_MANAGER_H_
