// What the workers' streams say of ranks: a registration reconciled with
// the ranks placed on the worker, heartbeats with what runs there and its
// progress, ranks started and exited, and workers lost. Each event moves
// the job it is about; a failure goes to the job's attempt (Attempts).
//
// Not thread-safe: the JobManager holds it as a member guarded by its
// mutex, and it works on the manager's table, outbox, health records and
// attempts, which the same mutex guards.
#ifndef RINGMASTER_COORDINATOR_JOBS_RANK_EVENTS_H_
#define RINGMASTER_COORDINATOR_JOBS_RANK_EVENTS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "common/clock.h"
#include "coordinator/core/job_table.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/reconcile.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/worker_membership.h"
#include "coordinator/health/health_keeper.h"
#include "coordinator/jobs/attempts.h"
#include "coordinator/jobs/job_manager_options.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "proto/worker.pb.h"

namespace ringmaster {

class RankEvents {
 public:
  struct Shared {
    JobTable& table;
    Outbox& outbox;
    HealthKeeper& health;
    Attempts& attempts;
  };
  RankEvents(Shared shared, WorkerMembership* membership, RendezvousStore* rendezvous,
             const Clock* clock, const JobManagerOptions& options)
      : table_(shared.table),
        outbox_(shared.outbox),
        health_(shared.health),
        attempts_(shared.attempts),
        membership_(membership),
        rendezvous_(rendezvous),
        clock_(clock),
        options_(options) {}

  // The events the registering worker still holds, then its running ranks
  // against those placed on it; *ack: the highest event to acknowledge.
  void Reconcile(const WorkerSession& session, const v1::RegisterWorker& request, int64_t* ack);
  void Heartbeat(const WorkerSession& session, const v1::Heartbeat& beat);
  // A rank event, a GPU error or stacks taken.
  void Apply(const std::string& worker_id, const v1::WorkerMessage& message);
  // The ranks of the workers' that are lost end with them.
  void OnWorkerLost(const LostWorker& lost);
  // A RUNNING rank its worker's reports no longer list ended there and its
  // exit was lost: after kReportsBeforeQuery reports without it the exit is
  // asked for again, after kReportsBeforeLost the rank is RANK_LOST.
  void CheckRanksReported(JobRecord& entry);
  static constexpr int kReportsBeforeQuery = 2;
  static constexpr int kReportsBeforeLost = 4;
  // Finds jobs in the table.
  JobLookup FindJob();

 private:
  void OnRankStarted(const std::string& worker_id, const v1::RankStarted& started);
  void OnRankExited(const std::string& worker_id, const v1::RankExited& exited);
  // A rank of the current attempt ended (or was lost): update the job.
  void OnRankEnded(JobRecord& entry, int rank, const FailureCause& cause);
  // Snapshots (rank_events_snapshots.cc). What the worker holds in memory
  // of each job, into the jobs' ledgers.
  void NoteSnapshots(const WorkerSession& session, const v1::Heartbeat& beat);
  // Images being pulled for STARTING jobs: Job.pulling, and the start
  // timeout held off.
  void NotePulls(const WorkerSession& session, const v1::Heartbeat& beat, absl::Time now);
  // All `worker_id` holds now (nothing: a lost worker).
  void ReportSnapshots(const std::string& worker_id,
                       const std::vector<v1::HeldSnapshots>& snapshots);
  // A rank's report: why it keeps no snapshots; rank 0's, the attempt's
  // first step (and where it resumed from) and its stalls, for goodput.
  void NoteResume(JobRecord& entry, int rank, const v1::Progress& progress);
  // Where the attempt resumed from and what the restart cost (to its first
  // step, at `first_step`), once per attempt and group.
  // False when this attempt's (and group's) resume was noted already.
  bool NoteResumed(JobRecord& entry, const v1::Progress& progress, absl::Time first_step);

  JobTable& table_;
  Outbox& outbox_;
  HealthKeeper& health_;
  Attempts& attempts_;
  WorkerMembership* const membership_;
  RendezvousStore* const rendezvous_;
  const Clock* const clock_;
  const JobManagerOptions& options_;
  // The jobs each worker last said it holds snapshots of.
  std::map<std::string, std::set<std::string>> snapshot_jobs_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOBS_RANK_EVENTS_H_
