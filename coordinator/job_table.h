// Every job the coordinator knows, in memory and in the job store: its
// creation, transitions stored before they are applied, snapshots, and the
// watchers that see each change. Jobs keep their submission order.
#ifndef RINGMASTER_COORDINATOR_JOB_TABLE_H_
#define RINGMASTER_COORDINATOR_JOB_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/job_store.h"
#include "coordinator/progress_watch.h"
#include "coordinator/restart_policy.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// One job: its stored state, and what the JobManager tracks of its current
// attempt in memory only.
struct JobRecord {
  v1::Job job;
  absl::Time restart_at;  // while RESTARTING
  std::map<int, v1::Progress> rank_progress;
  ProgressWatch watch;
  // The current attempt is failing: the most telling cause so far, final
  // at decide_at or once every rank has ended.
  std::optional<FailureCause> ending;
  absl::Time decide_at;
  std::optional<FailureCause> last_failure;  // of the previous attempt
  absl::Time regrow_since = absl::InfiniteFuture();  // elastic: room for `ranks` since

  // Records a rank's report; the job's progress is rank 0's, with
  // throughput summed over the ranks.
  void SetRankProgress(int rank, const v1::Progress& progress);
};

// The number in a job id ("<name>-<number>", numbers increasing with
// submission); 0 for an id without one.
int64_t JobNumber(const std::string& job_id);

// Thread-compatible: the JobManager calls it under its mutex. Observers and
// the transition hook run under that mutex and must only queue or record.
class JobTable {
 public:
  using Observer = std::function<void(const v1::Job&)>;
  using TransitionHook = std::function<void(const v1::Job& before, const v1::StateChange&)>;

  JobTable(JobStore* store, const Clock* clock, TransitionHook on_transition)
      : store_(store), clock_(clock), on_transition_(std::move(on_transition)) {}

  // Loads every stored job.
  absl::Status Load();
  // Stores a new PENDING job for a validated spec, with an id of its name
  // and a number never used before.
  absl::StatusOr<JobRecord*> Create(v1::JobSpec spec);
  JobRecord* Find(const std::string& job_id);
  // NOT_FOUND naming the job when there is none.
  absl::StatusOr<JobRecord*> Get(const std::string& job_id);
  // The rank `ref` names when it belongs to its job's current attempt and
  // was placed on `worker_id`, with its job in *record; else null.
  v1::RankStatus* FindRank(const std::string& worker_id, const v1::RankRef& ref,
                           JobRecord** record);
  // In submission order.
  const std::vector<std::unique_ptr<JobRecord>>& records() const { return records_; }

  // Stores the transition and its reason, then applies it in memory and
  // tells the watchers. The caller acts on it only when this returns OK.
  absl::Status Transition(JobRecord& record, v1::JobState to, v1::Reason reason,
                          const std::string& message);
  // Stores the snapshot (ranks, progress) and tells the watchers.
  void Persist(JobRecord& record);
  // Tells the watchers only (progress between snapshots).
  void Notify(const JobRecord& record);

  // Deletes the job from the store, then forgets it.
  absl::Status Delete(const std::string& job_id);

  // Calls `observer` with the job now, then after every change.
  absl::StatusOr<int64_t> Watch(const std::string& job_id, Observer observer);
  void Unwatch(int64_t watch_id);

 private:
  struct Watcher {
    std::string job_id;
    Observer observer;
  };

  JobRecord& Add(v1::Job job);

  JobStore* const store_;
  const Clock* const clock_;
  const TransitionHook on_transition_;
  std::vector<std::unique_ptr<JobRecord>> records_;
  std::map<std::string, JobRecord*> by_id_;
  std::map<int64_t, Watcher> watchers_;
  int64_t next_watch_id_ = 1;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOB_TABLE_H_
