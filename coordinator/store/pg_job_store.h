// The job store in PostgreSQL, which several coordinators share (one leads
// at a time: coordinator/leader_lease.h). The schema is SQLite's, in
// PostgreSQL's types.
//
// The writing calls never wait for the network: they queue their
// statements on a PgWriter (one transaction per call, or per Batch), and
// Sync waits until PostgreSQL has committed everything queued before it,
// across a lost connection or a server restart. Job numbers and submit
// request ids come from memory, read from the store when it opens. The
// writer is fenced by the lease term it was opened with; once another
// coordinator leads, Sync fails with FAILED_PRECONDITION and nothing more
// is written.
//
// A write the server refuses (a duplicate job id, say) is found when it is
// committed: the writer stops and Sync returns the error. The reading calls
// first wait for the writes queued before them, then ask the server.
#ifndef RINGMASTER_COORDINATOR_STORE_PG_JOB_STORE_H_
#define RINGMASTER_COORDINATOR_STORE_PG_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "coordinator/core/job_store.h"
#include "coordinator/store/pg_db.h"
#include "coordinator/store/pg_writer.h"

namespace ringmaster {

struct PgJobStoreOptions {
  std::string conninfo;
  std::string password;  // empty: libpq's own
  PgFence fence;         // run inside every write transaction; empty: none
  absl::Duration connect_timeout = absl::Seconds(10);
  // A standby's: reads alone, with no writer (its thread and connection)
  // and no submit request ids loaded; every write is FAILED_PRECONDITION.
  bool read_only = false;
};

// The key that signs credentials, kept in the database so that every
// coordinator sharing it accepts the same tokens. The first coordinator to
// ask stores `local_key` (its state directory's), so that tokens issued
// before it moved to PostgreSQL stay valid.
absl::StatusOr<std::string> SharedCredentialKey(const PgJobStoreOptions& options,
                                                const std::string& local_key);
// The shared key replaced by `next`.
absl::Status RotateSharedCredentialKey(const PgJobStoreOptions& options, const std::string& next);

class PgJobStore final : public JobStore {
 public:
  static constexpr int kSchemaVersion = 6;

  // Connects, creates or checks the schema, and starts the writer.
  // FAILED_PRECONDITION when the database has a schema version this build
  // does not know.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const PgJobStoreOptions& options);
  // Waits (up to 10 s) for the writes queued, as a clean shutdown should.
  ~PgJobStore() override;

  absl::StatusOr<int64_t> NextJobNumber() override;
  absl::StatusOr<int64_t> NextRunNumber() override;
  absl::Status Create(const v1::Job& job, const std::string& request_id = "") override;
  absl::StatusOr<std::string> FindRequest(const std::string& request_id) override;
  absl::Status RecordTransition(const v1::Job& job, int drop, int from) override;
  absl::Status Update(const v1::Job& job) override;
  absl::Status Delete(const std::string& job_id) override;
  absl::Status PutWorkerHealth(const v1::WorkerHealth& record) override;
  absl::StatusOr<std::vector<v1::WorkerHealth>> LoadWorkerHealth() override;
  absl::Status Retire(const RetiredJob& job) override;
  absl::Status Revive(const std::string& job_id) override;
  absl::Status Batch(const std::function<absl::Status()>& body) override;
  absl::Status Sync() override;
  bool Synced() const override;
  int64_t syncs() override { return writer_ ? writer_->commits() : 0; }
  absl::StatusOr<std::vector<v1::Job>> LoadResident() override;
  absl::StatusOr<std::vector<RetiredJob>> LoadRetired() override;
  absl::StatusOr<v1::Job> Load(const std::string& job_id) override;
  absl::StatusOr<std::vector<v1::Job>> ListRetired(const RetiredQuery& query) override;

  bool Reachable() const override { return writer_ == nullptr || writer_->connected(); }

 private:
  PgJobStore(PgJobStoreOptions options, std::unique_ptr<PgDb> reader,
             std::unique_ptr<PgWriter> writer, int64_t last_number,
             std::map<std::string, std::string> requests,
             std::map<std::string, std::string> request_of_job)
      : options_(std::move(options)),
        reader_(std::move(reader)),
        writer_(std::move(writer)),
        last_number_(last_number),
        requests_(std::move(requests)),
        request_of_job_(std::move(request_of_job)) {}
  static absl::Status ReadOnly();
  static absl::Status Migrate(PgDb* db);
  // The tables of schema version 4, where PostgreSQL stores began.
  static absl::Status CreateVersion4(PgDb* db);
  // Queues `statements` as one transaction, or into the open Batch.
  absl::Status Write(std::vector<PgStatement> statements);
  // Waits until everything queued so far is committed, up to `timeout`.
  absl::Status Flush(absl::Duration timeout);
  absl::Status ReadHistory(v1::Job* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  // A query on the reading connection, made again on a new connection once
  // when the old one turns out to be lost.
  absl::StatusOr<PgResult> Read(const std::string& sql, const std::vector<PgParam>& params = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);

  const PgJobStoreOptions options_;
  Mutex read_mu_;  // the reading connection is used by one call at a time
  std::unique_ptr<PgDb> reader_ ABSL_GUARDED_BY(read_mu_);
  const std::unique_ptr<PgWriter> writer_;  // null when read_only

  // The writing owner's alone (the JobManager's mutex).
  int64_t last_number_ = 0;
  std::optional<std::vector<PgStatement>> batch_;  // open while a Batch runs
  // Every stored request id, and its job's id: a submit never waits for
  // the database to find out whether it is a retry.
  std::map<std::string, std::string> requests_;
  std::map<std::string, std::string> request_of_job_;  // the other way
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_PG_JOB_STORE_H_
