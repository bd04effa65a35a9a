// Durable job state in SQLite: every job, its current snapshot, and the
// full history of its state transitions. A coordinator restart reloads it.
#ifndef RINGMASTER_COORDINATOR_JOB_STORE_H_
#define RINGMASTER_COORDINATOR_JOB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/sqlite_db.h"
#include "proto/job.pb.h"

namespace ringmaster {

// Not thread-safe: the JobManager calls it under its own mutex.
class JobStore {
 public:
  static constexpr int kSchemaVersion = 1;

  // Opens or creates the database at `path` (WAL mode). FAILED_PRECONDITION
  // when the file has a schema version this build does not know.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);

  // A number never handed out before, for the next job id.
  absl::StatusOr<int64_t> NextJobNumber();

  // Stores a new job together with the transitions in its history.
  absl::Status Create(const v1::Job& job);

  // Stores the job's snapshot and appends `change` to its history in one
  // transaction. `job` already carries `change` as its last history entry.
  absl::Status RecordTransition(const v1::Job& job, const v1::StateChange& change);

  // Stores the job's snapshot (ranks, progress) without a transition.
  absl::Status Update(const v1::Job& job);

  // Removes the job and its history.
  absl::Status Delete(const std::string& job_id);

  // Every job in submission order, each with its full history.
  absl::StatusOr<std::vector<v1::Job>> LoadAll();

 private:
  explicit JobStore(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
  absl::Status Migrate();
  absl::Status WriteSnapshot(const v1::Job& job);
  absl::Status AppendTransition(const std::string& job_id,
                                const v1::StateChange& change);

  std::unique_ptr<SqliteDb> db_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOB_STORE_H_
