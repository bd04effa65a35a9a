#include "coordinator/job_store.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  ASSIGN_OR_RETURN(auto db, SqliteDb::Open(path));
  // WAL keeps readers off the writer's back; FULL sync makes each
  // committed transition survive a power cut, not only a process kill.
  RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  std::unique_ptr<JobStore> store(new JobStore(std::move(db)));
  RETURN_IF_ERROR(store->Migrate());
  return store;
}

absl::Status JobStore::Migrate() {
  RETURN_IF_ERROR(db_->Exec(
      "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
  ASSIGN_OR_RETURN(auto query, db_->Prepare("SELECT version FROM schema_version"));
  ASSIGN_OR_RETURN(bool has_row, query.Step());
  if (has_row) {
    int64_t version = query.ColumnInt(0);
    if (version != kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job store schema version ", version, " is not ", kSchemaVersion,
          " (this build's); use a matching coordinator or another --state-dir"));
    }
    return absl::OkStatus();
  }
  return db_->Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(db_->Exec(
        "CREATE TABLE jobs ("
        "  number INTEGER PRIMARY KEY,"
        "  id TEXT NOT NULL UNIQUE,"
        "  state INTEGER NOT NULL,"
        "  snapshot BLOB NOT NULL);"
        "CREATE TABLE transitions ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  job_id TEXT NOT NULL REFERENCES jobs(id),"
        "  change BLOB NOT NULL);"
        "CREATE INDEX transitions_by_job ON transitions(job_id, seq);"
        "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"));
    ASSIGN_OR_RETURN(auto insert,
                     db_->Prepare("INSERT INTO schema_version VALUES (?)"));
    return insert.Bind(1, int64_t{kSchemaVersion}).Run();
  });
}

absl::StatusOr<int64_t> JobStore::NextJobNumber() {
  int64_t number = 0;
  RETURN_IF_ERROR(db_->Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(db_->Exec(
        "INSERT INTO counters VALUES ('job', 0) ON CONFLICT(name) DO "
        "UPDATE SET value = value + 1"));
    ASSIGN_OR_RETURN(auto query,
                     db_->Prepare("SELECT value FROM counters WHERE name = 'job'"));
    ASSIGN_OR_RETURN(bool has_row, query.Step());
    if (!has_row) return absl::InternalError("job counter vanished");
    number = query.ColumnInt(0) + 1;
    return absl::OkStatus();
  }));
  return number;
}

absl::Status JobStore::WriteSnapshot(const v1::Job& job) {
  v1::Job snapshot = job;
  snapshot.clear_history();  // history lives in the transitions table
  ASSIGN_OR_RETURN(auto update,
                   db_->Prepare("UPDATE jobs SET state = ?, snapshot = ? WHERE id = ?"));
  return update.Bind(1, int64_t{job.state()})
      .BindBlob(2, snapshot.SerializeAsString())
      .Bind(3, job.id())
      .Run();
}

absl::Status JobStore::AppendTransition(const std::string& job_id,
                                        const v1::StateChange& change) {
  ASSIGN_OR_RETURN(auto insert, db_->Prepare(
                                    "INSERT INTO transitions (job_id, change) "
                                    "VALUES (?, ?)"));
  return insert.Bind(1, job_id).BindBlob(2, change.SerializeAsString()).Run();
}

absl::Status JobStore::Create(const v1::Job& job) {
  return db_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto insert,
                     db_->Prepare("INSERT INTO jobs (id, state, snapshot) "
                                  "VALUES (?, ?, x'')"));
    RETURN_IF_ERROR(insert.Bind(1, job.id()).Bind(2, int64_t{job.state()}).Run());
    RETURN_IF_ERROR(WriteSnapshot(job));
    for (const auto& change : job.history()) {
      RETURN_IF_ERROR(AppendTransition(job.id(), change));
    }
    return absl::OkStatus();
  });
}

absl::Status JobStore::RecordTransition(const v1::Job& job,
                                        const v1::StateChange& change) {
  return db_->Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(WriteSnapshot(job));
    return AppendTransition(job.id(), change);
  });
}

absl::Status JobStore::Update(const v1::Job& job) { return WriteSnapshot(job); }

absl::Status JobStore::Delete(const std::string& job_id) {
  return db_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto transitions, db_->Prepare("DELETE FROM transitions WHERE job_id = ?"));
    RETURN_IF_ERROR(transitions.Bind(1, job_id).Run());
    ASSIGN_OR_RETURN(auto job, db_->Prepare("DELETE FROM jobs WHERE id = ?"));
    return job.Bind(1, job_id).Run();
  });
}

absl::StatusOr<std::vector<v1::Job>> JobStore::LoadAll() {
  std::vector<v1::Job> jobs;
  ASSIGN_OR_RETURN(auto query,
                   db_->Prepare("SELECT id, snapshot FROM jobs ORDER BY number"));
  std::map<std::string, size_t> index;
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, query.Step());
    if (!has_row) break;
    v1::Job job;
    if (!job.ParseFromString(query.ColumnBlob(1))) {
      return absl::DataLossError(
          absl::StrCat("job ", query.ColumnText(0), " has an unreadable snapshot"));
    }
    index[job.id()] = jobs.size();
    jobs.push_back(std::move(job));
  }
  ASSIGN_OR_RETURN(auto history, db_->Prepare(
                                     "SELECT job_id, change FROM transitions "
                                     "ORDER BY seq"));
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, history.Step());
    if (!has_row) break;
    auto it = index.find(history.ColumnText(0));
    if (it == index.end()) continue;
    if (!jobs[it->second].add_history()->ParseFromString(history.ColumnBlob(1))) {
      return absl::DataLossError(
          absl::StrCat("job ", it->first, " has an unreadable transition"));
    }
  }
  return jobs;
}

}  // namespace ringmaster
