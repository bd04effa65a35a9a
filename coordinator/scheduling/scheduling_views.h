// What the scheduler sees of the jobs, kept from one scheduling pass to the
// next so that a pass reads no job that has not changed: a view of each
// PENDING job (its gang, queue and priority) and of each job whose ranks
// hold slots (where, and what of it may be preempted). Each pass brings the
// views up to the JobTable, runs the queues' scheduler (ScheduleQueues)
// over them, says on each job that waits why it waits, and returns what to
// start and whom to preempt; the JobManager acts on that.
//
// A scheduling policy lives here and in queue_scheduler/scheduler: the
// JobManager only starts and preempts what a pass decides.
#ifndef RINGMASTER_COORDINATOR_SCHEDULING_SCHEDULING_VIEWS_H_
#define RINGMASTER_COORDINATOR_SCHEDULING_SCHEDULING_VIEWS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "coordinator/core/job_table.h"
#include "coordinator/core/schedulable_worker.h"
#include "coordinator/scheduling/queue_scheduler.h"
#include "coordinator/scheduling/scheduler.h"
#include "domain/queue_config.h"
#include "proto/cluster.pb.h"

namespace ringmaster {

// What the job asks of the cluster, whose --topology-levels are `levels`.
GangRequest GangOf(const v1::JobSpec& spec, const std::vector<std::string>& levels);
// When the job was preempted within the last hour (as it keeps them),
// oldest first.
std::vector<absl::Time> PreemptedAt(const v1::Job& job);

// Not thread-safe: the JobManager keeps it under its own mutex.
class SchedulingViews {
 public:
  // `cordoned`: whether a worker is cordoned (an XID, a quarantine, the
  // admin); called during the views' calls.
  SchedulingViews(QueueConfig queues, SchedulingPolicy policy,
                  std::function<bool(const std::string&)> cordoned = nullptr)
      : queues_(std::move(queues)), policy_(policy), cordoned_(std::move(cordoned)) {}

  const QueueConfig& queues() const { return queues_; }
  const SchedulingPolicy& policy() const { return policy_; }
  // Replaces the queues; every view is made again at the next pass.
  void SetQueues(QueueConfig queues);

  // What one pass decided, by job number.
  struct Decisions {
    std::vector<std::pair<int64_t, std::vector<RankPlacement>>> starts;
    std::vector<Preemption> preemptions;
  };
  // One pass over `table`'s pending jobs on `workers` at `now`. A job that
  // waits is told why (its pending_reason, notified) when that changes.
  Decisions Pass(JobTable& table, const std::vector<SchedulableWorker>& workers, absl::Time now);
  // The JobManager preempted `victim` for `preemptor`: the preemptor goes
  // first until the victim's ranks have let go of their slots.
  void Preempted(const std::string& victim, const std::string& preemptor);
  // The job started: it no longer waits for victims.
  void Started(const std::string& job_id) { preemptors_.erase(job_id); }

  // Free slots of `workers` as the placed views of `table` hold them,
  // leaving out the ranks of `except`.
  std::vector<WorkerCapacity> Capacity(const JobTable& table,
                                       const std::vector<SchedulableWorker>& workers,
                                       const std::string& except = "");

  // The workers kept as spares (--spare-workers) at the last pass.
  const absl::flat_hash_set<std::string>& spares() const { return spares_; }

  // The PENDING jobs with a deadline, by number, as of the last pass.
  std::vector<int64_t> PendingWithDeadline() const;
  // Whether the workers' reports may say something new of the job's ranks
  // since it was last looked at (its sightings_checked): it has changed,
  // or a worker its ranks hold slots on (as of its placed view) is in
  // `relisted`.
  bool MaySeeNewSightings(const JobRecord& entry,
                          const absl::flat_hash_set<std::string>& relisted) const;

  // Each queue and what it held at the last pass, and the priority classes.
  v1::ListQueuesResponse ListQueues() const;

 private:
  // Brings pending_ up to table.pending() (when it has changed) and marks
  // preemptors.
  void UpdatePending(JobTable& table);
  void MergePending(const JobTable& table);
  // Marks the spares in `free`: policy_.spare_workers of the workers where
  // no job that may not run on a spare holds slots (one that a job
  // recovering on a spare holds is one no more), spread over domains, each
  // spare kept while it can be. Fewer when not enough are free.
  void ChooseSpares(std::vector<WorkerCapacity>& free);
  // Keeps the jobs' exclusions in their pending views only where the other
  // workers can hold them.
  void ApplyExclusions(const JobTable& table, const std::vector<WorkerCapacity>& free);
  // Brings placed_ up to table.placed().
  void UpdatePlaced(const JobTable& table, const std::vector<SchedulableWorker>& workers);
  // The queue's name as queues_ spells it, else `queue`: the views name
  // their queue by the config's strings, which a pass reads thousands of
  // times.
  std::string_view QueueName(const std::string& queue) const;

  QueueConfig queues_;
  const SchedulingPolicy policy_;
  const std::function<bool(const std::string&)> cordoned_;
  // A view of each PENDING job, oldest first, kept until the job's stamp
  // in JobTable::pending() changes; beside each, that stamp and the reason
  // it was last given, so that a pass reads no job whose reason stays.
  std::vector<PendingJob> pending_;
  struct PendingMeta {
    int64_t stamp = 0;
    int reason = -1;        // in reason_texts_; -1: none
    bool deadline = false;  // the spec has deadline_s
    bool excludes = false;  // the job has excluded_workers
  };
  std::vector<PendingMeta> pending_meta_;
  int64_t pending_at_ = -1;               // JobTable::pending_changes() then
  std::vector<int64_t> preemptor_views_;  // the views marked preemptor
  std::vector<int64_t> excluding_views_;  // the views of jobs that exclude workers
  // A view of each placed job, oldest first, kept while the job's revision
  // stays (every change to a job takes a new one): the ranks that hold
  // slots and, while it is STARTING or RUNNING, what may be preempted or
  // counts against its queue.
  struct PlacedView {
    int64_t number = 0;
    int64_t revision = 0;
    bool running = false;
    RunningJob job;  // job.ranks: where its ranks hold slots
    // The same by worker: the slots its ranks hold on each, and their CPUs
    // and memory.
    struct OnWorker {
      std::string worker_id;
      std::vector<int> slots;
      int cpus = 0;
      int64_t memory_mb = 0;
    };
    std::vector<OnWorker> held;
  };
  std::vector<PlacedView> placed_;
  absl::flat_hash_set<std::string> spares_;
  // PENDING jobs that preempted others, by id: the victims still stopping.
  std::map<std::string, std::set<std::string>> preemptors_;
  std::map<std::string, QueueLoad> queue_loads_;
  NeverFitsCache never_fits_;  // from pass to pass
  // The reasons jobs were last given, each once: a pass compares each
  // waiting job's reason as a number, not its text. Made again, with only
  // those in use, before a pass when it has grown past kMaxReasons.
  int Intern(std::string_view reason);
  void CompactReasons();
  static constexpr size_t kMaxReasons = 4096;
  std::vector<std::string> reason_texts_;
  absl::flat_hash_map<std::string, int> reason_ids_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SCHEDULING_SCHEDULING_VIEWS_H_
