#include "coordinator/store/sqlite_job_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/credentials.h"
#include "common/status_macros.h"

namespace ringmaster {

namespace {

constexpr off_t kCheckpointWalBytes = 8 << 20;

absl::Status SyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot sync directory of ", path, ": ", strerror(error)));
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> SqliteJobStore::Open(const std::string& path) {
  ASSIGN_OR_RETURN(auto writer, SqliteDb::Open(path));
  // WAL keeps readers off the writer's back. Commits do not sync
  // (synchronous=NORMAL): Sync makes them durable with one fdatasync of the
  // log for many commits, outside the caller's locks, and checkpoints run
  // there too rather than inside a commit.
  RETURN_IF_ERROR(writer->Exec(
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0;"));
  const std::string wal_path = path + "-wal";
  const int wal_fd = open(wal_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (wal_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", wal_path, ": ", strerror(errno)));
  }
  absl::StatusOr<std::unique_ptr<SqliteDb>> reader = SqliteDb::Open(path);
  absl::StatusOr<std::unique_ptr<SqliteDb>> checkpointer =
      reader.ok() ? SqliteDb::Open(path) : reader.status();
  if (!checkpointer.ok()) {
    close(wal_fd);
    return checkpointer.status();
  }
  std::unique_ptr<SqliteJobStore> store(
      new SqliteJobStore(std::move(writer), std::move(*reader), std::move(*checkpointer), wal_fd));
  RETURN_IF_ERROR(SyncDirectoryOf(path));
  {
    MutexLock lock(&store->read_mu_);
    RETURN_IF_ERROR(store->reader_->Exec("PRAGMA synchronous=NORMAL;"));
  }
  RETURN_IF_ERROR(store->checkpointer_->Exec("PRAGMA synchronous=NORMAL;"));
  RETURN_IF_ERROR(store->Migrate());
  RETURN_IF_ERROR(store->Sync());
  return store;
}

SqliteJobStore::SqliteJobStore(std::unique_ptr<SqliteDb> writer, std::unique_ptr<SqliteDb> reader,
                               std::unique_ptr<SqliteDb> checkpointer, int wal_fd)
    : writer_(std::move(writer)),
      reader_(std::move(reader)),
      wal_fd_(wal_fd),
      checkpointer_(std::move(checkpointer)),
      checkpoint_thread_([this] { CheckpointLoop(); }) {}

SqliteJobStore::~SqliteJobStore() {
  {
    MutexLock lock(&checkpoint_mu_);
    closing_ = true;
  }
  checkpoint_thread_.join();
  close(wal_fd_);
}

absl::Status SqliteJobStore::Sync() {
  MutexLock lock(&sync_mu_);
  const int64_t commits = writer_->commits();
  if (commits == synced_commits_.load()) return absl::OkStatus();
  if (fdatasync(wal_fd_) != 0) {
    return absl::DataLossError(absl::StrCat("cannot sync the job store's log: ", strerror(errno)));
  }
  synced_commits_.store(commits);
  ++syncs_;
  struct stat wal;
  if (fstat(wal_fd_, &wal) == 0 && wal.st_size > kCheckpointWalBytes) {
    MutexLock checkpoint_lock(&checkpoint_mu_);
    checkpoint_wanted_ = true;
  }
  return absl::OkStatus();
}

void SqliteJobStore::CheckpointLoop() {
  for (;;) {
    {
      MutexLock lock(&checkpoint_mu_);
      checkpoint_mu_.Await(absl::Condition(this, &SqliteJobStore::CheckpointDue));
      if (closing_) return;
      checkpoint_wanted_ = false;
    }
    // PASSIVE: copies what no reader needs and never waits for the writer.
    if (absl::Status s = checkpointer_->Exec("PRAGMA wal_checkpoint(PASSIVE)"); !s.ok()) {
      spdlog::warn("job store checkpoint: {}", s.ToString());
    }
  }
}

absl::Status SqliteJobStore::Migrate() {
  RETURN_IF_ERROR(
      writer_->Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
  ASSIGN_OR_RETURN(auto query, writer_->Prepare("SELECT version FROM schema_version"));
  ASSIGN_OR_RETURN(bool has_row, query.Step());
  const int64_t version = has_row ? query.ColumnInt(0) : 0;
  if (version == kSchemaVersion) return absl::OkStatus();
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("job store schema version ", version, " is newer than ", kSchemaVersion,
                     " (this build's); use a matching coordinator or another --state-dir"));
  }
  return writer_->Transaction([&]() -> absl::Status {
    if (version == 0) {
      RETURN_IF_ERROR(
          writer_->Exec("CREATE TABLE jobs ("
                        "  number INTEGER PRIMARY KEY,"
                        "  id TEXT NOT NULL UNIQUE,"
                        "  state INTEGER NOT NULL,"
                        "  snapshot BLOB NOT NULL);"
                        "CREATE TABLE transitions ("
                        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                        "  job_id TEXT NOT NULL REFERENCES jobs(id),"
                        "  change BLOB NOT NULL);"
                        "CREATE INDEX transitions_by_job ON transitions(job_id, seq);"
                        "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
                        "INSERT INTO schema_version VALUES (1);"));
    }
    // Version 2: a job's number is its id's (version 1 took the next row
    // id, which can differ after a delete); retired jobs (resident = 0)
    // stay out of memory.
    if (version == 1) RETURN_IF_ERROR(RenumberJobs());
    if (version < 2) {
      RETURN_IF_ERROR(
          writer_->Exec("ALTER TABLE jobs ADD COLUMN resident INTEGER NOT NULL DEFAULT 1;"
                        "ALTER TABLE jobs ADD COLUMN ended_unix_ms INTEGER NOT NULL DEFAULT 0;"
                        "ALTER TABLE jobs ADD COLUMN workers TEXT NOT NULL DEFAULT '';"
                        "CREATE INDEX resident_jobs ON jobs(number) WHERE resident = 1;"));
    }
    // Version 3: jobs' labels, for ListJobs to filter on, and the request
    // ids of submissions, which make SubmitJob idempotent (jobs stored
    // before had neither).
    if (version < 3) {
      RETURN_IF_ERROR(
          writer_->Exec("CREATE TABLE job_labels ("
                        "  key TEXT NOT NULL,"
                        "  value TEXT NOT NULL,"
                        "  number INTEGER NOT NULL,"
                        "  PRIMARY KEY (key, value, number)) WITHOUT ROWID;"
                        "CREATE INDEX labels_by_job ON job_labels(number);"
                        "CREATE TABLE submit_requests ("
                        "  request_id TEXT PRIMARY KEY,"
                        "  number INTEGER NOT NULL);"
                        "CREATE INDEX requests_by_job ON submit_requests(number);"));
    }
    // Version 4: workers' health (cordons, quarantines, failures blamed).
    RETURN_IF_ERROR(
        writer_->Exec("CREATE TABLE worker_health ("
                      "  worker_id TEXT PRIMARY KEY,"
                      "  record BLOB NOT NULL);"
                      "DELETE FROM schema_version;"
                      "INSERT INTO schema_version VALUES (4);"));
    return absl::OkStatus();
  });
}

absl::Status SqliteJobStore::RenumberJobs() {
  std::vector<std::pair<int64_t, std::string>> jobs;
  ASSIGN_OR_RETURN(auto select, writer_->Prepare("SELECT number, id FROM jobs"));
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    jobs.emplace_back(select.ColumnInt(0), select.ColumnText(1));
  }
  // Through negative numbers, so that no two rows share one on the way.
  for (const auto& [number, id] : jobs) {
    ASSIGN_OR_RETURN(auto update, writer_->Prepare("UPDATE jobs SET number = ? WHERE id = ?"));
    RETURN_IF_ERROR(update.Bind(1, -JobNumberOf(id)).Bind(2, id).Run());
  }
  return writer_->Exec("UPDATE jobs SET number = -number");
}

absl::StatusOr<int64_t> SqliteJobStore::NextCounter(const std::string& name) {
  int64_t number = 0;
  RETURN_IF_ERROR(writer_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto bump, writer_->Prepare("INSERT INTO counters VALUES (?, 0) ON "
                                                 "CONFLICT(name) DO UPDATE SET value = value + 1"));
    RETURN_IF_ERROR(bump.Bind(1, name).Run());
    ASSIGN_OR_RETURN(auto query, writer_->Prepare("SELECT value FROM counters WHERE name = ?"));
    ASSIGN_OR_RETURN(bool has_row, query.Bind(1, name).Step());
    if (!has_row) return absl::InternalError(absl::StrCat(name, " counter vanished"));
    number = query.ColumnInt(0) + 1;
    return absl::OkStatus();
  }));
  return number;
}

absl::StatusOr<int64_t> SqliteJobStore::NextJobNumber() { return NextCounter("job"); }

absl::StatusOr<int64_t> SqliteJobStore::NextRunNumber() { return NextCounter("run"); }

absl::Status SqliteJobStore::WriteSnapshot(const v1::Job& job) {
  v1::Job snapshot = job;
  snapshot.clear_history();  // history lives in the transitions table
  ASSIGN_OR_RETURN(auto update,
                   writer_->Prepare("UPDATE jobs SET state = ?, snapshot = ? WHERE id = ?"));
  return update.Bind(1, int64_t{job.state()})
      .BindBlob(2, snapshot.SerializeAsString())
      .Bind(3, job.id())
      .Run();
}

absl::Status SqliteJobStore::AppendTransition(const std::string& job_id,
                                              const v1::StateChange& change) {
  ASSIGN_OR_RETURN(auto insert,
                   writer_->Prepare("INSERT INTO transitions (job_id, change) VALUES (?, ?)"));
  return insert.Bind(1, job_id).BindBlob(2, change.SerializeAsString()).Run();
}

absl::Status SqliteJobStore::Create(const v1::Job& job, const std::string& request_id) {
  return writer_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto insert, writer_->Prepare("INSERT INTO jobs (number, id, state, "
                                                   "snapshot) VALUES (?, ?, ?, x'')"));
    RETURN_IF_ERROR(insert.Bind(1, JobNumberOf(job.id()))
                        .Bind(2, job.id())
                        .Bind(3, int64_t{job.state()})
                        .Run());
    RETURN_IF_ERROR(WriteSnapshot(job));
    for (const auto& change : job.history()) {
      RETURN_IF_ERROR(AppendTransition(job.id(), change));
    }
    for (const auto& [key, value] : job.spec().labels()) {
      ASSIGN_OR_RETURN(auto label, writer_->Prepare("INSERT INTO job_labels (key, value, number) "
                                                    "VALUES (?, ?, ?)"));
      RETURN_IF_ERROR(label.Bind(1, key).Bind(2, value).Bind(3, JobNumberOf(job.id())).Run());
    }
    if (request_id.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(auto request, writer_->Prepare("INSERT INTO submit_requests (request_id, "
                                                    "number) VALUES (?, ?)"));
    return request.Bind(1, request_id).Bind(2, JobNumberOf(job.id())).Run();
  });
}

absl::Status SqliteJobStore::RecordTransition(const v1::Job& job, int drop, int from) {
  return writer_->Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(WriteSnapshot(job));
    if (drop > 0) {
      ASSIGN_OR_RETURN(auto last, writer_->Prepare("DELETE FROM transitions WHERE seq IN (SELECT "
                                                   "seq FROM transitions WHERE job_id = ? ORDER "
                                                   "BY seq DESC LIMIT ?)"));
      RETURN_IF_ERROR(last.Bind(1, job.id()).Bind(2, int64_t{drop}).Run());
    }
    for (int i = from; i < job.history_size(); ++i) {
      RETURN_IF_ERROR(AppendTransition(job.id(), job.history(i)));
    }
    return absl::OkStatus();
  });
}

absl::Status SqliteJobStore::Update(const v1::Job& job) {
  return writer_->Transaction([&] { return WriteSnapshot(job); });
}

absl::Status SqliteJobStore::Delete(const std::string& job_id) {
  return writer_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto transitions,
                     writer_->Prepare("DELETE FROM transitions WHERE job_id = ?"));
    RETURN_IF_ERROR(transitions.Bind(1, job_id).Run());
    for (const char* sql : {"DELETE FROM job_labels WHERE number = ?",
                            "DELETE FROM submit_requests WHERE number = ?"}) {
      ASSIGN_OR_RETURN(auto rows, writer_->Prepare(sql));
      RETURN_IF_ERROR(rows.Bind(1, JobNumberOf(job_id)).Run());
    }
    ASSIGN_OR_RETURN(auto job, writer_->Prepare("DELETE FROM jobs WHERE id = ?"));
    return job.Bind(1, job_id).Run();
  });
}

absl::Status SqliteJobStore::PutWorkerHealth(const v1::WorkerHealth& record) {
  return writer_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto put,
                     writer_->Prepare("INSERT OR REPLACE INTO worker_health VALUES (?, ?)"));
    return put.Bind(1, record.worker_id()).BindBlob(2, record.SerializeAsString()).Run();
  });
}

absl::StatusOr<std::vector<v1::WorkerHealth>> SqliteJobStore::LoadWorkerHealth() {
  std::vector<v1::WorkerHealth> records;
  ASSIGN_OR_RETURN(auto query, writer_->Prepare("SELECT worker_id, record FROM worker_health "
                                                "ORDER BY worker_id"));
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, query.Step());
    if (!has_row) break;
    if (!records.emplace_back().ParseFromString(query.ColumnBlob(1))) {
      return absl::DataLossError(
          absl::StrCat("worker ", query.ColumnText(0), " has an unreadable health record"));
    }
  }
  return records;
}

absl::Status SqliteJobStore::Retire(const RetiredJob& job) {
  return writer_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto update,
                     writer_->Prepare("UPDATE jobs SET resident = 0, ended_unix_ms = ?, "
                                      "workers = ? WHERE id = ?"));
    return update.Bind(1, job.ended_unix_ms)
        .Bind(2, absl::StrJoin(job.workers, " "))
        .Bind(3, job.id)
        .Run();
  });
}

absl::Status SqliteJobStore::Revive(const std::string& job_id) {
  return writer_->Transaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto update,
                     writer_->Prepare("UPDATE jobs SET resident = 1, ended_unix_ms = 0, "
                                      "workers = '' WHERE id = ?"));
    return update.Bind(1, job_id).Run();
  });
}

absl::StatusOr<std::vector<v1::Job>> SqliteJobStore::LoadResident() {
  std::vector<v1::Job> jobs;
  std::map<std::string, size_t> index;
  ASSIGN_OR_RETURN(auto query, writer_->Prepare("SELECT id, snapshot FROM jobs "
                                                "WHERE resident = 1 ORDER BY number"));
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, query.Step());
    if (!has_row) break;
    v1::Job job;
    if (!ParseJobSnapshot(query.ColumnBlob(1), &job)) {
      return absl::DataLossError(
          absl::StrCat("job ", query.ColumnText(0), " has an unreadable snapshot"));
    }
    index[job.id()] = jobs.size();
    jobs.push_back(std::move(job));
  }
  ASSIGN_OR_RETURN(auto history, writer_->Prepare("SELECT t.job_id, t.change FROM transitions t "
                                                  "JOIN jobs j ON j.id = t.job_id "
                                                  "WHERE j.resident = 1 ORDER BY t.seq"));
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, history.Step());
    if (!has_row) break;
    auto it = index.find(history.ColumnText(0));
    if (it == index.end()) continue;
    if (!jobs[it->second].add_history()->ParseFromString(history.ColumnBlob(1))) {
      return absl::DataLossError(absl::StrCat("job ", it->first, " has an unreadable transition"));
    }
  }
  return jobs;
}

absl::StatusOr<std::vector<RetiredJob>> SqliteJobStore::LoadRetired() {
  std::vector<RetiredJob> jobs;
  ASSIGN_OR_RETURN(auto query,
                   writer_->Prepare("SELECT number, id, state, ended_unix_ms, workers, snapshot "
                                    "FROM jobs WHERE resident = 0 ORDER BY number"));
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, query.Step());
    if (!has_row) break;
    jobs.push_back({query.ColumnInt(0), query.ColumnText(1),
                    static_cast<v1::JobState>(query.ColumnInt(2)), query.ColumnInt(3),
                    absl::StrSplit(query.ColumnText(4), ' ', absl::SkipEmpty()),
                    RevisionOfSnapshot(query.ColumnBlob(5))});
  }
  return jobs;
}

absl::Status SqliteJobStore::ReadHistory(v1::Job* job) {
  ASSIGN_OR_RETURN(auto history, reader_->Prepare("SELECT change FROM transitions "
                                                  "WHERE job_id = ? ORDER BY seq"));
  history.Bind(1, job->id());
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, history.Step());
    if (!has_row) return absl::OkStatus();
    if (!job->add_history()->ParseFromString(history.ColumnBlob(0))) {
      return absl::DataLossError(absl::StrCat("job ", job->id(), " has an unreadable transition"));
    }
  }
}

absl::StatusOr<std::string> SqliteJobStore::FindRequest(const std::string& request_id) {
  ASSIGN_OR_RETURN(auto query, writer_->Prepare("SELECT jobs.id FROM submit_requests JOIN jobs "
                                                "USING (number) WHERE request_id = ?"));
  query.Bind(1, request_id);
  ASSIGN_OR_RETURN(bool has_row, query.Step());
  return has_row ? query.ColumnText(0) : std::string();
}

absl::StatusOr<v1::Job> SqliteJobStore::Load(const std::string& job_id) {
  MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(auto query, reader_->Prepare("SELECT snapshot FROM jobs WHERE id = ?"));
  query.Bind(1, job_id);
  ASSIGN_OR_RETURN(bool has_row, query.Step());
  if (!has_row) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  v1::Job job;
  if (!ParseJobSnapshot(query.ColumnBlob(0), &job)) {
    return absl::DataLossError(absl::StrCat("job ", job_id, " has an unreadable snapshot"));
  }
  RETURN_IF_ERROR(ReadHistory(&job));
  return job;
}

absl::StatusOr<std::vector<v1::Job>> SqliteJobStore::ListRetired(const RetiredQuery& query) {
  // A job's name is its id without "-<number>".
  std::string sql = absl::StrCat(
      "SELECT snapshot FROM jobs WHERE ", query.resident_too ? "1" : "resident = 0",
      " AND number < ?1 "
      "AND substr(id, 1, length(?2)) = ?2 AND length(?2) < length(id) - length(number) ");
  if (!query.states.empty()) {
    std::vector<std::string> states;
    for (v1::JobState state : query.states) states.push_back(absl::StrCat(int{state}));
    absl::StrAppend(&sql, "AND state IN (", absl::StrJoin(states, ", "), ") ");
  }
  // Each label is a pair of parameters from ?4 on.
  for (size_t i = 0; i < query.labels.size(); ++i) {
    absl::StrAppend(&sql, "AND number IN (SELECT number FROM job_labels WHERE key = ?", 4 + 2 * i,
                    " AND value = ?", 5 + 2 * i, ") ");
  }
  absl::StrAppend(&sql, "ORDER BY number DESC LIMIT ?3");
  MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(auto select, reader_->Prepare(sql));
  select.Bind(1, query.before_number).Bind(2, query.name_prefix).Bind(3, int64_t{query.limit});
  int parameter = 4;
  for (const auto& [key, value] : query.labels) {
    select.Bind(parameter, key).Bind(parameter + 1, value);
    parameter += 2;
  }
  std::vector<v1::Job> jobs;
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    v1::Job job;
    if (!ParseJobSnapshot(select.ColumnBlob(0), &job)) {
      return absl::DataLossError("a stored job has an unreadable snapshot");
    }
    jobs.push_back(std::move(job));
  }
  for (v1::Job& job : jobs) RETURN_IF_ERROR(ReadHistory(&job));
  return jobs;
}

}  // namespace ringmaster
