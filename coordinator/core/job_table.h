// Every job the coordinator knows, in memory and in the job store: its
// creation, transitions stored before they are applied, snapshots, and the
// watchers that see each change. Jobs keep their submission order.
#ifndef RINGMASTER_COORDINATOR_CORE_JOB_TABLE_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/job_id.h"
#include "coordinator/core/change_log.h"
#include "coordinator/core/job_store.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/progress_series.h"
#include "coordinator/core/progress_watch.h"
#include "coordinator/core/restart_policy.h"
#include "coordinator/core/snapshot_ledger.h"
#include "coordinator/core/straggler_watch.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// One job: its stored state, and what the JobManager tracks of its current
// attempt in memory only.
// The job's training throughput, the one figure every view shows: samples
// per second over all ranks, as the mean rate of the ranks that report one
// times the world size. While only some ranks have reported (or a program
// reports from rank 0 alone), it is the whole job's, not that share's.
double JobSamplesPerSecond(const std::map<int, v1::Progress>& rank_progress, int world_size);

// Stacks asked of the current attempt's workers (DumpStacks): what came
// so far, by rank. A hang's failure waits for them, or for the deadline.
struct StacksRequest {
  int attempt = 0;
  std::string why;
  absl::Time deadline;
  std::set<std::string> workers;  // asked
  std::set<std::string> answered;
  std::map<int, v1::RankStacks> ranks;  // received
  std::optional<FailureCause> hang;     // to note once they are in
  std::vector<std::function<void(const absl::StatusOr<v1::StacksReport>&)>> waiting;
};

struct JobRecord {
  v1::Job job;
  absl::Time restart_at;  // while RESTARTING
  std::map<int, v1::Progress> rank_progress;
  ProgressSeries series;  // the job's progress over its run, for charts
  ProgressWatch watch;
  // When a pull of the job's image last moved (the start timeout counts
  // from then), and how far each worker's was at its last report.
  absl::Time pulled_at = absl::InfinitePast();
  std::map<std::string, int64_t> pulled_bytes;
  // The current attempt is failing: the most telling cause so far, final
  // at decide_at or once every rank has ended.
  std::optional<FailureCause> ending;
  absl::Time decide_at;
  std::optional<FailureCause> last_failure;          // of the previous attempt
  absl::Time regrow_since = absl::InfiniteFuture();  // elastic: room for `ranks` since
  // RUNNING ranks their worker's reports have stopped listing: the report
  // count when first missed, and whether the exit was asked for again.
  struct Unseen {
    int64_t since = 0;
    bool queried = false;
  };
  std::map<int, Unseen> unseen;  // by rank
  // The revision CheckRanksReportedLocked last looked at.
  int64_t sightings_checked = -1;
  std::optional<StacksRequest> stacks_request;
  // The ranks' compute times of the current attempt, and each rank's ratio
  // to the job's median at the last look (for the metric).
  StragglerWatch stragglers;
  std::map<int, double> slowdown;
  // What the job's workers hold of it in memory, kept across attempts as
  // the workers keep it.
  SnapshotLedger snapshots;
  // When the latest interrupted attempt failed or was stopped, and the step
  // it had reached: what the next attempt's resume is measured against.
  struct Interruption {
    int attempt = -1;
    int generation = 0;  // of the attempt's group
    absl::Time at;
    int64_t reached = 0;
  };
  Interruption interrupted;

  // Records a rank's report; the job's progress is rank 0's, with
  // throughput summed over the ranks.
  void SetRankProgress(int rank, const v1::Progress& progress);
};

// Whether any rank of the job's current attempt holds its slot.
bool HoldsSlots(const v1::Job& job);

// Every worker that has held a rank of the job (its logs and files are there).
std::vector<std::string> WorkersOf(const v1::Job& job);

// Thread-compatible: the JobManager calls it under its mutex. Jobs are
// resident (held whole in memory) until they have ended and none of their
// ranks holds a slot; then RetireEnded keeps only a summary of them, and the
// rest is read from the store. Work per tick thus follows the live jobs, not
// the history.
class JobTable {
 public:
  using Records = std::map<int64_t, std::unique_ptr<JobRecord>>;  // by job number
  using TransitionHook = std::function<void(const v1::Job& before, const v1::StateChange&)>;

  // Changes reach watchers through `outbox`, after they are durable.
  JobTable(JobStore* store, Outbox* outbox, const Clock* clock, TransitionHook on_transition)
      : store_(store), outbox_(outbox), clock_(clock), on_transition_(std::move(on_transition)) {}

  // Loads the resident jobs and the summaries of retired ones, and retires
  // those that have ended since.
  absl::Status Load();
  // Stores a new PENDING job for `job`'s validated spec (with its owner
  // and priority), with an id of its name and a number never used before.
  absl::StatusOr<JobRecord*> Create(v1::Job job, const std::string& request_id = "");
  // A resident job, or null.
  JobRecord* Find(const std::string& job_id);
  // NOT_FOUND naming the job when no resident job has the id.
  absl::StatusOr<JobRecord*> Get(const std::string& job_id);
  // A retired job's summary, or null.
  const RetiredJob* FindRetired(const std::string& job_id) const;
  // The rank `ref` names when it belongs to its job's current attempt and
  // was placed on `worker_id`, with its job in *record; else null.
  v1::RankStatus* FindRank(const std::string& worker_id, const v1::RankRef& ref,
                           JobRecord** record);

  // Resident jobs in submission order.
  const Records& resident() const { return resident_; }
  // PENDING jobs, oldest first: each number with a stamp that changes each
  // time the job becomes PENDING (so that what is derived from a pending
  // job can be kept while the stamp stays).
  const absl::btree_map<int64_t, int64_t>& pending() const { return pending_; }
  // Counts the changes to pending(): a job added to it or removed.
  int64_t pending_changes() const { return pending_changes_; }
  // The resident jobs that are not PENDING (placed, restarting, or ended
  // with ranks still to stop), oldest first.
  const absl::btree_map<int64_t, JobRecord*>& placed() const { return placed_; }
  // Retired jobs by number.
  const std::map<int64_t, RetiredJob>& retired() const { return retired_; }

  // Stores the transition and its reason, then applies it in memory and
  // tells the watchers. The caller acts on it only when this returns OK.
  absl::Status Transition(JobRecord& record, v1::JobState to, v1::Reason reason,
                          const std::string& message);
  // Records an event in the job's history without a change of state
  // (a straggler, a rank replaced), stored with its snapshot; the
  // transition hook sees it too.
  absl::Status Note(JobRecord& record, v1::Reason reason, const std::string& message);
  // Stores the snapshot (ranks, progress) and tells the watchers.
  void Persist(JobRecord& record);
  // Tells the watchers only (progress between snapshots). Every change
  // (a new job, a transition, a snapshot, progress) takes the next
  // revision, stored with it when it is stored.
  void Notify(JobRecord& record);
  // The jobs changed after `revision`, oldest change first, each with its
  // latest revision: from the ChangeLog, or for a revision older than it
  // holds (of an earlier run too), from every job's record.
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ChangedSince(int64_t revision) const;

  // Retires every resident job that has ended with no rank holding a slot.
  // Invalidates references to those records.
  void RetireEnded();
  // Makes retired `job` (read whole from the store) resident again, to be
  // requeued.
  absl::StatusOr<JobRecord*> Revive(v1::Job job);
  // Files a PENDING job anew, so that what is derived from it (the
  // scheduler's view) is read again: it was held, released or given
  // another priority.
  void Refile(JobRecord& record);
  // Deletes a retired job, or an ended resident one, from the store, then
  // forgets it.
  absl::Status Delete(const std::string& job_id);

  // Calls `observer` with the job now, then after every change.
  int64_t Watch(const JobRecord& record, Outbox::Observer observer);

 private:
  // Enough for a watcher to resume after a short break in a busy cluster
  // (a job reports progress about once a second).
  static constexpr size_t kRememberedChanges = 20000;
  // Run n numbers its changes from (n << kRunRevisionBits) + 1.
  static constexpr int kRunRevisionBits = 40;

  JobRecord& Add(v1::Job job);
  // Gives the job's change the next revision.
  void Stamp(v1::Job& job);

  JobStore* const store_;
  Outbox* const outbox_;
  const Clock* const clock_;
  const TransitionHook on_transition_;
  ChangeLog changes_{kRememberedChanges};
  Records resident_;
  std::map<std::string, JobRecord*> by_id_;  // resident
  // B-trees: each tick walks them whole.
  absl::btree_map<int64_t, int64_t> pending_;
  int64_t pending_stamp_ = 0;
  int64_t pending_changes_ = 0;
  absl::btree_map<int64_t, JobRecord*> placed_;
  // Files the job under pending_ or placed_ by its state.
  void Classify(int64_t number, JobRecord& record);
  std::map<int64_t, RetiredJob> retired_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_TABLE_H_
