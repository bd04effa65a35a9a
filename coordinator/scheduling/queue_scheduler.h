// Which pending jobs start, which wait and why, and which running jobs are
// preempted: the policy of docs/scheduling.md as one pure function over a
// snapshot, so that it is tested (and simulated) on a fake clock.
//
//   1. Higher priority first. Among equal priorities, the queue with the
//      lowest weighted dominant share (max of its slot and GPU shares,
//      divided by its weight), counting half of its next job, goes next,
//      as in Kueue's and YARN's fair sharing. A queue below its share, beside
//      another that wants capacity, reserves for its next job at once.
//      Within a queue, users take turns: the next job of equal priority is
//      that of the user with the fewest jobs running there and ahead of it,
//      the older on a tie; a user's own jobs first come first served, a
//      preempted job keeping its place among them.
//   2. A queue never uses more than its limit; a user never runs more than
//      the queue's max_running_jobs_per_user there.
//   3. A job that fits starts. One that does not fit waits; once it has
//      waited reserve_after it reserves the free slots it needs as they
//      free up, and later jobs start only on slots it does not need.
//   4. A job its queue's quota entitles to run, that does not fit,
//      preempts: victims from queues over their quota first (taking back
//      what was lent), then its own queue's jobs of lower priority, lowest
//      priority first, then the newest; its own queue's jobs younger than
//      min_runtime only when the others do not free enough, another
//      queue's never; never a non-preemptible one, nor one preempted
//      max_preemptions_per_hour times within the hour; an elastic job
//      shrinks before it is stopped whole; only as many as needed. The
//      preemptor then reserves what the victims free.
//   5. Jobs within their queue's quota go before jobs that would borrow,
//      whatever their priorities (as in Kueue), and while one of them waits
//      for slots no job borrows: what is lent is only what no queue within
//      its quota waits for, so a borrower is never placed only to be
//      preempted on the next pass.
#ifndef RINGMASTER_COORDINATOR_SCHEDULING_QUEUE_SCHEDULER_H_
#define RINGMASTER_COORDINATOR_SCHEDULING_QUEUE_SCHEDULER_H_

#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/scheduling/never_fits_cache.h"
#include "coordinator/scheduling/scheduler.h"
#include "domain/queue_config.h"
#include "domain/worker_count.h"

namespace ringmaster {

// Jobs name their id, queue and owner by views of the caller's strings,
// which outlive the pass and its decisions: a pass over thousands of jobs
// copies none of them.
struct PendingJob {
  std::string_view job_id;
  std::string_view queue;
  std::string_view owner;
  int priority = 0;
  int64_t sequence = 0;      // submit order (the job number)
  absl::Time pending_since;  // of this wait
  // It has preempted jobs that are still stopping: it goes first and
  // reserves, and preempts no more.
  bool preemptor = false;
  GangRequest request;
};

struct RunningJob {
  std::string_view job_id;
  std::string_view queue;
  std::string_view owner;
  int priority = 0;
  absl::Time started;
  bool preemptible = true;
  GangRequest request;
  std::vector<RankPlacement> ranks;  // where its ranks hold slots
  // When it was preempted lately (at least the last
  // max_preemptions_per_hour times).
  std::vector<absl::Time> preempted_at;
};

struct SchedulingPolicy {
  absl::Duration reserve_after = absl::Seconds(60);
  absl::Duration min_runtime = absl::Minutes(2);
  // A job preempted this many times within the last hour is not preempted
  // again until the oldest of them is an hour old; 0: no bound.
  int max_preemptions_per_hour = 3;
  // --topology-levels, widest first: the levels a job's placement names.
  std::vector<std::string> topology_levels;
  // --spare-workers: kept out of normal placement, for jobs that lost a
  // worker (and spare_ok jobs until then).
  WorkerCount spare_workers{0, 0};
};

// How many of `preempted_at` lie within the hour before `now`.
int PreemptionsInTheLastHour(const std::vector<absl::Time>& preempted_at, absl::Time now);

struct Preemption {
  std::string victim;
  std::string preemptor;
  // Elastic: restart the victim with at most this many ranks; 0: stop it.
  int keep_ranks = 0;
};

// What a queue holds, after the decisions.
struct QueueLoad {
  SlotAmount in_use;
  int running_jobs = 0;
  int pending_jobs = 0;
};

// What a pass decided for one pending job.
struct JobDecision {
  std::vector<RankPlacement> placement;  // where it starts; empty: it waits
  std::string_view waiting;              // why it waits, for people: one of `reasons`
};

struct SchedulingDecisions {
  std::vector<JobDecision> jobs;  // one per pending job, in the order given
  // Why jobs wait: jobs waiting for the same reason share one.
  std::deque<std::string> reasons;
  std::vector<Preemption> preemptions;
  std::map<std::string, QueueLoad> queues;  // every queue of the config
};

// The slots and GPUs `ranks` ranks of `request` hold.
SlotAmount AmountOf(const GangRequest& request, int ranks);

// Decides one scheduling pass. `free` is what the workers have free now
// (FreeCapacity); `running` the jobs holding slots that may be preempted
// or count against their queue. Jobs of a queue the config no longer has
// are scheduled as if in the default queue. `never_fits`, when given,
// keeps its answers for the next pass.
SchedulingDecisions ScheduleQueues(const QueueConfig& config,
                                   const std::vector<PendingJob>& pending,
                                   const std::vector<const RunningJob*>& running,
                                   std::vector<WorkerCapacity> free, absl::Time now,
                                   const SchedulingPolicy& policy,
                                   NeverFitsCache* never_fits = nullptr);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SCHEDULING_QUEUE_SCHEDULER_H_
