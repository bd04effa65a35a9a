// Durable job state: every job, its current snapshot, and the full history
// of its state transitions; and each worker's health record. A coordinator
// restart reloads it. SqliteJobStore (sqlite_job_store.h) keeps it in a
// file beside the coordinator.
//
// Writes do not wait for the disk: they are durable once Sync returns
// (group commit: one sync covers every transaction committed before it).
// The JobManager acts on a change only after a Sync that follows it.
//
// Ended jobs whose ranks have all stopped are retired: the coordinator keeps
// only a summary of them in memory and reads them back from here.
#ifndef RINGMASTER_COORDINATOR_CORE_JOB_STORE_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  int64_t revision = 0;              // of its last stored snapshot
};

// Which retired jobs ListRetired returns, newest first.
struct RetiredQuery {
  bool resident_too = false;  // and jobs not retired (a standby's listing)
  int64_t before_number = INT64_MAX;
  std::set<v1::JobState> states;  // empty: any
  std::string name_prefix;
  int limit = 100;
  std::map<std::string, std::string> labels;  // jobs with every one of them
};

// For the implementations: the number that ends a job id ("<name>-<number>";
// 0 when it has none), and a stored snapshot parsed (those stored before
// jobs had owners are the admin's); false when it cannot be.
int64_t JobNumberOf(const std::string& job_id);
bool ParseJobSnapshot(const std::string& bytes, v1::Job* job);
// Job.revision of a stored snapshot (0 when it does not parse).
int64_t RevisionOfSnapshot(const std::string& bytes);

// The writing calls (Create to Retire, Batch) are made by one owner at a
// time (the JobManager, under its mutex). Sync and the reading calls (Load,
// ListRetired) are thread-safe.
class JobStore {
 public:
  virtual ~JobStore() = default;

  // A number never handed out before, for the next job id.
  virtual absl::StatusOr<int64_t> NextJobNumber() = 0;
  // 1, 2, ...: a number for each run of a leading coordinator over this
  // store, durable when returned (job revisions of a run begin above
  // those of every run before; see JobTable::Load).
  virtual absl::StatusOr<int64_t> NextRunNumber() = 0;

  // Stores a new job together with the transitions in its history, and
  // the submission's request id (SubmitJobRequest.request_id) when it has
  // one.
  virtual absl::Status Create(const v1::Job& job, const std::string& request_id = "") = 0;

  // The job submitted with `request_id`, while it is stored; empty when
  // none is. Called by the writing owner: it reads what that owner wrote.
  virtual absl::StatusOr<std::string> FindRequest(const std::string& request_id) = 0;

  // Stores the job's snapshot and the end of its history in one
  // transaction: the last `drop` entries stored go, and job.history()
  // from entry `from` on is appended (a change is one entry appended; a
  // fold rewrites a few at the end, coordinator/history_fold.h).
  virtual absl::Status RecordTransition(const v1::Job& job, int drop, int from) = 0;

  // Stores the job's snapshot (ranks, progress) without a transition.
  virtual absl::Status Update(const v1::Job& job) = 0;

  // Removes the job and its history.
  virtual absl::Status Delete(const std::string& job_id) = 0;

  // Stores a worker's health record (WorkerHealth.worker_id), replacing
  // the one before.
  virtual absl::Status PutWorkerHealth(const v1::WorkerHealth& record) = 0;
  // Every worker's record, by id.
  virtual absl::StatusOr<std::vector<v1::WorkerHealth>> LoadWorkerHealth() = 0;

  // Marks an ended job as no longer held in memory.
  virtual absl::Status Retire(const RetiredJob& job) = 0;
  // Marks a retired job as held in memory again (a job requeued).
  virtual absl::Status Revive(const std::string& job_id) = 0;

  // Runs `body`'s writes as one transaction (one commit for a whole tick).
  virtual absl::Status Batch(const std::function<absl::Status()>& body) = 0;

  // Makes every transaction committed so far durable. Returns at once when
  // an earlier Sync covered them all.
  virtual absl::Status Sync() = 0;
  // Whether every committed transaction is durable; never waits.
  virtual bool Synced() const = 0;
  // How many times Sync went to the disk.
  virtual int64_t syncs() = 0;
  // Whether the store answers: false while a shared store's connection is
  // down (the coordinator's health is NOT_SERVING then).
  virtual bool Reachable() const { return true; }

  // Jobs not retired, in submission order, each with its full history.
  virtual absl::StatusOr<std::vector<v1::Job>> LoadResident() = 0;
  // Summaries of retired jobs in submission order.
  virtual absl::StatusOr<std::vector<RetiredJob>> LoadRetired() = 0;

  // One job with its history; NOT_FOUND when there is none.
  virtual absl::StatusOr<v1::Job> Load(const std::string& job_id) = 0;
  // Retired jobs (and, with resident_too, the others) matching `query`,
  // newest first, with their histories.
  virtual absl::StatusOr<std::vector<v1::Job>> ListRetired(const RetiredQuery& query) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_STORE_H_
