// The job store in SQLite: a file beside the coordinator, in WAL mode.
// Commits do not sync; Sync makes them durable with one fdatasync of the
// log for many commits, outside the caller's locks, and a thread of its own
// checkpoints the log into the database.
#ifndef RINGMASTER_COORDINATOR_STORE_SQLITE_JOB_STORE_H_
#define RINGMASTER_COORDINATOR_STORE_SQLITE_JOB_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "coordinator/core/job_store.h"
#include "coordinator/store/sqlite_db.h"

namespace ringmaster {

// The reading calls use a connection of their own.
class SqliteJobStore final : public JobStore {
 public:
  static constexpr int kSchemaVersion = 4;

  // Opens or creates the database at `path` (WAL mode), upgrading a
  // version 1 store. FAILED_PRECONDITION when the file has a schema version
  // this build does not know.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~SqliteJobStore() override;

  // A number never handed out before, for the next job id.
  absl::StatusOr<int64_t> NextJobNumber() override;
  absl::StatusOr<int64_t> NextRunNumber() override;

  // Stores a new job together with the transitions in its history, and
  // the submission's request id (SubmitJobRequest.request_id) when it has
  // one.
  absl::Status Create(const v1::Job& job, const std::string& request_id = "") override;

  // The job submitted with `request_id`, while it is stored; empty when
  // none is. Called by the writing owner: it reads what that owner wrote.
  absl::StatusOr<std::string> FindRequest(const std::string& request_id) override;

  // Stores the job's snapshot and appends `change` to its history in one
  // transaction. `job` already carries `change` as its last history entry.
  absl::Status RecordTransition(const v1::Job& job, int drop, int from) override;

  // Stores the job's snapshot (ranks, progress) without a transition.
  absl::Status Update(const v1::Job& job) override;

  // Removes the job and its history.
  absl::Status Delete(const std::string& job_id) override;

  // Stores a worker's health record (WorkerHealth.worker_id), replacing
  // the one before.
  absl::Status PutWorkerHealth(const v1::WorkerHealth& record) override;
  // Every worker's record, by id.
  absl::StatusOr<std::vector<v1::WorkerHealth>> LoadWorkerHealth() override;

  // Marks an ended job as no longer held in memory.
  absl::Status Retire(const RetiredJob& job) override;
  absl::Status Revive(const std::string& job_id) override;

  // Runs `body`'s writes as one transaction (one commit for a whole tick).
  absl::Status Batch(const std::function<absl::Status()>& body) override {
    return writer_->Transaction(body);
  }

  // Makes every transaction committed so far durable. Returns at once when
  // an earlier Sync covered them all.
  absl::Status Sync() override;
  // Whether every committed transaction is durable; never waits.
  bool Synced() const override { return writer_->commits() == synced_commits_.load(); }
  // How many times Sync went to the disk.
  int64_t syncs() override {
    MutexLock lock(&sync_mu_);
    return syncs_;
  }

  // Jobs not retired, in submission order, each with its full history.
  absl::StatusOr<std::vector<v1::Job>> LoadResident() override;
  // Summaries of retired jobs in submission order.
  absl::StatusOr<std::vector<RetiredJob>> LoadRetired() override;

  // One job with its history; NOT_FOUND when there is none.
  absl::StatusOr<v1::Job> Load(const std::string& job_id) override;
  // Retired jobs matching `query`, newest first, with their histories.
  absl::StatusOr<std::vector<v1::Job>> ListRetired(const RetiredQuery& query) override;

 private:
  SqliteJobStore(std::unique_ptr<SqliteDb> writer, std::unique_ptr<SqliteDb> reader,
                 std::unique_ptr<SqliteDb> checkpointer, int wal_fd);
  // The next value of the counter `name` ("job", "run"), from 1.
  absl::StatusOr<int64_t> NextCounter(const std::string& name);
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

#endif  // RINGMASTER_COORDINATOR_STORE_SQLITE_JOB_STORE_H_
