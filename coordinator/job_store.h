// Durable job state in SQLite: every job, its current snapshot, and the
// full history of its state transitions; and each worker's health record.
// A coordinator restart reloads it.
//
// Writes do not wait for the disk: they are durable once Sync returns
// (group commit: one fdatasync of the write-ahead log covers every
// transaction committed before it). The JobManager acts on a change only
// after a Sync that follows it.
//
// Ended jobs whose ranks have all stopped are retired: the coordinator keeps
// only a summary of them in memory and reads them back from here.
#ifndef RINGMASTER_COORDINATOR_JOB_STORE_H_
#define RINGMASTER_COORDINATOR_JOB_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "coordinator/sqlite_db.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {

// What is kept in memory of a retired job.
struct RetiredJob {
  int64_t number = 0;
  std::string id;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  int64_t ended_unix_ms = 0;
  std::vector<std::string> workers;  // that ran its ranks, and so hold its logs
};

// Which retired jobs ListRetired returns, newest first.
struct RetiredQuery {
  int64_t before_number = INT64_MAX;
  std::set<v1::JobState> states;  // empty: any
  std::string name_prefix;
  int limit = 100;
  std::map<std::string, std::string> labels;  // jobs with every one of them
};

// The writing calls (Create to Retire, Batch) are made by one owner at a
// time (the JobManager, under its mutex). Sync and the reading calls (Load,
// ListRetired) are thread-safe and use a connection of their own.
class JobStore {
 public:
  static constexpr int kSchemaVersion = 4;

  // Opens or creates the database at `path` (WAL mode), upgrading a
  // version 1 store. FAILED_PRECONDITION when the file has a schema version
  // this build does not know.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();

  // A number never handed out before, for the next job id.
  absl::StatusOr<int64_t> NextJobNumber();

  // Stores a new job together with the transitions in its history, and
  // the submission's request id (SubmitJobRequest.request_id) when it has
  // one.
  absl::Status Create(const v1::Job& job, const std::string& request_id = "");

  // The job submitted with `request_id`, while it is stored; empty when
  // none is. Called by the writing owner: it reads what that owner wrote.
  absl::StatusOr<std::string> FindRequest(const std::string& request_id);

  // Stores the job's snapshot and appends `change` to its history in one
  // transaction. `job` already carries `change` as its last history entry.
  absl::Status RecordTransition(const v1::Job& job, const v1::StateChange& change);

  // Stores the job's snapshot (ranks, progress) without a transition.
  absl::Status Update(const v1::Job& job);

  // Removes the job and its history.
  absl::Status Delete(const std::string& job_id);

  // Stores a worker's health record (WorkerHealth.worker_id), replacing
  // the one before.
  absl::Status PutWorkerHealth(const v1::WorkerHealth& record);
  // Every worker's record, by id.
  absl::StatusOr<std::vector<v1::WorkerHealth>> LoadWorkerHealth();

  // Marks an ended job as no longer held in memory.
  absl::Status Retire(const RetiredJob& job);

  // Runs `body`'s writes as one transaction (one commit for a whole tick).
  absl::Status Batch(const std::function<absl::Status()>& body) {
    return writer_->Transaction(body);
  }

  // Makes every transaction committed so far durable. Returns at once when
  // an earlier Sync covered them all.
  absl::Status Sync();
  // Whether every committed transaction is durable; never waits.
  bool Synced() const { return writer_->commits() == synced_commits_.load(); }
  // How many times Sync went to the disk.
  int64_t syncs() {
    MutexLock lock(&sync_mu_);
    return syncs_;
  }

  // Jobs not retired, in submission order, each with its full history.
  absl::StatusOr<std::vector<v1::Job>> LoadResident();
  // Summaries of retired jobs in submission order.
  absl::StatusOr<std::vector<RetiredJob>> LoadRetired();

  // One job with its history; NOT_FOUND when there is none.
  absl::StatusOr<v1::Job> Load(const std::string& job_id);
  // Retired jobs matching `query`, newest first, with their histories.
  absl::StatusOr<std::vector<v1::Job>> ListRetired(const RetiredQuery& query);

 private:
  JobStore(std::unique_ptr<SqliteDb> writer, std::unique_ptr<SqliteDb> reader,
           std::unique_ptr<SqliteDb> checkpointer, int wal_fd);
  // Copies the log into the database whenever it has grown past a bound,
  // so that the log is reused from its start; a thread of its own, off
  // every caller's path.
  void CheckpointLoop();
  bool CheckpointDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_) {
    return checkpoint_wanted_ || closing_;
  }
  absl::Status Migrate();
  absl::Status RenumberJobs();
  absl::Status WriteSnapshot(const v1::Job& job);
  absl::Status AppendTransition(const std::string& job_id, const v1::StateChange& change);
  // Appends the job's transitions to its history (reader connection).
  absl::Status ReadHistory(v1::Job* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);

  const std::unique_ptr<SqliteDb> writer_;

  Mutex read_mu_;  // the reading connection is used by one call at a time
  const std::unique_ptr<SqliteDb> reader_ ABSL_PT_GUARDED_BY(read_mu_);

  Mutex sync_mu_;     // one fdatasync at a time; callers waiting share the next
  const int wal_fd_;  // the write-ahead log, opened for fdatasync
  std::atomic<int64_t> synced_commits_{0};  // written under sync_mu_
  int64_t syncs_ ABSL_GUARDED_BY(sync_mu_) = 0;

  Mutex checkpoint_mu_;
  bool checkpoint_wanted_ ABSL_GUARDED_BY(checkpoint_mu_) = false;
  bool closing_ ABSL_GUARDED_BY(checkpoint_mu_) = false;
  const std::unique_ptr<SqliteDb> checkpointer_;  // used by the checkpoint thread only
  std::thread checkpoint_thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOB_STORE_H_
