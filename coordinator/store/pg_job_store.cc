#include "coordinator/store/pg_job_store.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// How long a read waits for the writes queued before it, and a shutdown for
// those still queued.
constexpr absl::Duration kFlushTimeout = absl::Seconds(10);

PgStatement Snapshot(const v1::Job& job) {
  v1::Job snapshot = job;
  snapshot.clear_history();  // history lives in the transitions table
  return {"UPDATE jobs SET state = $1, snapshot = $2 WHERE id = $3",
          {PgParam::Int(job.state()), PgParam::Bytes(snapshot.SerializeAsString()),
           PgParam::Text(job.id())}};
}

PgStatement Transition(const std::string& job_id, const v1::StateChange& change) {
  return {"INSERT INTO transitions (job_id, change) VALUES ($1, $2)",
          {PgParam::Text(job_id), PgParam::Bytes(change.SerializeAsString())}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> PgJobStore::Open(const PgJobStoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgDb> reader,
                   PgDb::Connect(options.conninfo, options.connect_timeout, options.password));
  RETURN_IF_ERROR(Migrate(reader.get()));
  ASSIGN_OR_RETURN(PgResult last,
                   reader->Query("SELECT GREATEST((SELECT value FROM counters WHERE name = "
                                 "'job'), (SELECT max(number) FROM jobs), 0)"));
  if (options.read_only) {
    return std::unique_ptr<JobStore>(
        new PgJobStore(options, std::move(reader), nullptr, last.Int(0, 0), {}, {}));
  }
  ASSIGN_OR_RETURN(PgResult stored, reader->Query("SELECT request_id, jobs.id FROM "
                                                  "submit_requests JOIN jobs USING (number)"));
  std::map<std::string, std::string> requests;
  for (int r = 0; r < stored.rows(); ++r) requests[stored.Text(r, 0)] = stored.Text(r, 1);
  std::map<std::string, std::string> request_of_job;
  for (const auto& [request, job] : requests) request_of_job[job] = request;
  PgWriterOptions writer_options;
  writer_options.conninfo = options.conninfo;
  writer_options.password = options.password;
  writer_options.fence = options.fence;
  ASSIGN_OR_RETURN(std::unique_ptr<PgWriter> writer,
                   PgWriter::Start(writer_options, options.connect_timeout));
  return std::unique_ptr<JobStore>(new PgJobStore(options, std::move(reader), std::move(writer),
                                                  last.Int(0, 0), std::move(requests),
                                                  std::move(request_of_job)));
}

namespace {

// The credential_key table, with the row of `local_key` when it has none.
// One coordinator at a time (the migrations' lock), so that the first
// one's key is there, committed, when the next one looks.
absl::Status MakeCredentialKey(PgDb& db, const std::string& local_key) {
  return db.Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(
        db.Exec("SELECT pg_advisory_xact_lock(7070); "
                "CREATE TABLE IF NOT EXISTS credential_key (id INTEGER PRIMARY KEY CHECK (id = 1), "
                "key BYTEA NOT NULL)"));
    return db
        .Query("INSERT INTO credential_key VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
               {PgParam::Bytes(local_key)})
        .status();
  });
}

}  // namespace

absl::StatusOr<std::string> SharedCredentialKey(const PgJobStoreOptions& options,
                                                const std::string& local_key) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgDb> db,
                   PgDb::Connect(options.conninfo, options.connect_timeout, options.password));
  constexpr char kRead[] = "SELECT key FROM credential_key";
  absl::StatusOr<PgResult> key = db->Query(kRead);  // made already, most often
  if (!key.ok() || key->rows() < 1) {
    RETURN_IF_ERROR(MakeCredentialKey(*db, local_key));
    key = db->Query(kRead);
  }
  RETURN_IF_ERROR(key.status());
  if (key->rows() < 1 || key->Bytes(0, 0).size() != local_key.size()) {
    return absl::DataLossError("the database's credential key is missing or of the wrong size");
  }
  return key->Bytes(0, 0);
}

absl::Status RotateSharedCredentialKey(const PgJobStoreOptions& options, const std::string& next) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgDb> db,
                   PgDb::Connect(options.conninfo, options.connect_timeout, options.password));
  RETURN_IF_ERROR(MakeCredentialKey(*db, next));
  return db->Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(db->Exec("SELECT pg_advisory_xact_lock(7070)"));
    return db->Query("UPDATE credential_key SET key = $1 WHERE id = 1", {PgParam::Bytes(next)})
        .status();
  });
}

absl::StatusOr<PgResult> PgJobStore::Read(const std::string& sql,
                                          const std::vector<PgParam>& params) {
  absl::StatusOr<PgResult> result = reader_->Query(sql, params);
  if (!absl::IsUnavailable(result.status())) return result;
  absl::StatusOr<std::unique_ptr<PgDb>> db =
      PgDb::Connect(options_.conninfo, options_.connect_timeout, options_.password);
  if (!db.ok()) return db.status();
  reader_ = *std::move(db);
  return reader_->Query(sql, params);
}

PgJobStore::~PgJobStore() {
  if (absl::Status s = Flush(kFlushTimeout); !s.ok()) {
    spdlog::warn("job store: writes not committed at shutdown: {}", s.ToString());
  }
}

absl::Status PgJobStore::Migrate(PgDb* db) {
  return db->Transaction([&]() -> absl::Status {
    // One coordinator at a time creates or upgrades the schema.
    RETURN_IF_ERROR(db->Exec("SELECT pg_advisory_xact_lock(7070)"));
    RETURN_IF_ERROR(
        db->Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
    ASSIGN_OR_RETURN(PgResult rows, db->Query("SELECT max(version) FROM schema_version"));
    const int64_t version = rows.Int(0, 0);
    if (version == kSchemaVersion) return absl::OkStatus();
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(
          absl::StrCat("job store schema version ", version, " is newer than ", kSchemaVersion,
                       " (this build's); use a matching coordinator or another database"));
    }
    // PostgreSQL stores began at version 4 (SQLite's then).
    if (version < 4) RETURN_IF_ERROR(CreateVersion4(db));
    // Version 5: code archives (coordinator/pg_code_archives.h), in chunks.
    if (version < 5) {
      RETURN_IF_ERROR(
          db->Exec("CREATE TABLE code_archives (sha256 TEXT PRIMARY KEY, bytes BIGINT NOT NULL);"
                   "CREATE TABLE code_chunks ("
                   "  sha256 TEXT NOT NULL,"
                   "  seq INTEGER NOT NULL,"
                   "  data BYTEA NOT NULL,"
                   "  PRIMARY KEY (sha256, seq));"
                   "INSERT INTO schema_version VALUES (5);"));
    }
    // Version 6: rendezvous keys (coordinator/pg_rendezvous_journal.h).
    return db->Exec(
        "CREATE TABLE rendezvous_keys ("
        "  job_id TEXT NOT NULL,"
        "  attempt INTEGER NOT NULL,"
        "  key BYTEA NOT NULL,"
        "  value BYTEA NOT NULL,"
        "  PRIMARY KEY (job_id, attempt, key));"
        "INSERT INTO schema_version VALUES (6);");
  });
}

absl::Status PgJobStore::CreateVersion4(PgDb* db) {
  return db->Exec(
      "CREATE TABLE jobs ("
      "  number BIGINT PRIMARY KEY,"
      "  id TEXT NOT NULL UNIQUE,"
      "  state INTEGER NOT NULL,"
      "  snapshot BYTEA NOT NULL,"
      "  resident INTEGER NOT NULL DEFAULT 1,"
      "  ended_unix_ms BIGINT NOT NULL DEFAULT 0,"
      "  workers TEXT NOT NULL DEFAULT '');"
      "CREATE INDEX resident_jobs ON jobs(number) WHERE resident = 1;"
      "CREATE TABLE transitions ("
      "  seq BIGSERIAL PRIMARY KEY,"
      "  job_id TEXT NOT NULL REFERENCES jobs(id),"
      "  change BYTEA NOT NULL);"
      "CREATE INDEX transitions_by_job ON transitions(job_id, seq);"
      "CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);"
      "CREATE TABLE job_labels ("
      "  key TEXT NOT NULL,"
      "  value TEXT NOT NULL,"
      "  number BIGINT NOT NULL,"
      "  PRIMARY KEY (key, value, number));"
      "CREATE INDEX labels_by_job ON job_labels(number);"
      "CREATE TABLE submit_requests ("
      "  request_id TEXT PRIMARY KEY,"
      "  number BIGINT NOT NULL);"
      "CREATE INDEX requests_by_job ON submit_requests(number);"
      "CREATE TABLE worker_health ("
      "  worker_id TEXT PRIMARY KEY,"
      "  record BYTEA NOT NULL);"
      "INSERT INTO schema_version VALUES (4);");
}

absl::Status PgJobStore::Write(std::vector<PgStatement> statements) {
  if (writer_ == nullptr) return ReadOnly();
  if (batch_) {
    for (PgStatement& s : statements) batch_->push_back(std::move(s));
    return absl::OkStatus();
  }
  return writer_->Submit(std::move(statements)).status();
}

absl::Status PgJobStore::Batch(const std::function<absl::Status()>& body) {
  if (batch_) return body();  // nested: part of the open one
  batch_.emplace();
  absl::Status s = body();
  std::vector<PgStatement> statements = std::move(*batch_);
  batch_.reset();
  if (!s.ok()) return s;  // none of it, as a rolled-back transaction
  if (statements.empty()) return absl::OkStatus();
  if (writer_ == nullptr) return ReadOnly();
  return writer_->Submit(std::move(statements)).status();
}

absl::Status PgJobStore::ReadOnly() {
  return absl::FailedPreconditionError("this job store was opened to read: it writes nothing");
}

absl::Status PgJobStore::Flush(absl::Duration timeout) {
  if (writer_ == nullptr) return absl::OkStatus();
  return writer_->WaitDurable(writer_->submitted(), timeout);
}

absl::Status PgJobStore::Sync() { return Flush(absl::InfiniteDuration()); }

bool PgJobStore::Synced() const {
  return writer_ == nullptr || writer_->durable() == writer_->submitted();
}

absl::StatusOr<int64_t> PgJobStore::NextJobNumber() {
  const int64_t number = last_number_ + 1;
  RETURN_IF_ERROR(
      Write({{"INSERT INTO counters VALUES ('job', $1) ON CONFLICT (name) DO UPDATE "
              "SET value = GREATEST(counters.value, excluded.value)",
              {PgParam::Int(number)}}}));
  last_number_ = number;
  return number;
}

absl::StatusOr<int64_t> PgJobStore::NextRunNumber() {
  int64_t last = 0;
  {
    MutexLock lock(&read_mu_);
    ASSIGN_OR_RETURN(PgResult run,
                     Read("SELECT COALESCE((SELECT value FROM counters WHERE name = 'run'), 0)"));
    last = run.Int(0, 0);
  }
  RETURN_IF_ERROR(
      Write({{"INSERT INTO counters VALUES ('run', $1) ON CONFLICT (name) DO UPDATE "
              "SET value = GREATEST(counters.value, excluded.value)",
              {PgParam::Int(last + 1)}}}));
  RETURN_IF_ERROR(Flush(options_.connect_timeout));
  return last + 1;
}

absl::Status PgJobStore::Create(const v1::Job& job, const std::string& request_id) {
  const int64_t number = JobNumberOf(job.id());
  std::vector<PgStatement> statements;
  statements.push_back({"INSERT INTO jobs (number, id, state, snapshot) VALUES ($1, $2, $3, $4)",
                        {PgParam::Int(number), PgParam::Text(job.id()), PgParam::Int(job.state()),
                         PgParam::Bytes("")}});
  statements.push_back(Snapshot(job));
  for (const v1::StateChange& change : job.history()) {
    statements.push_back(Transition(job.id(), change));
  }
  for (const auto& [key, value] : job.spec().labels()) {
    statements.push_back({"INSERT INTO job_labels (key, value, number) VALUES ($1, $2, $3)",
                          {PgParam::Text(key), PgParam::Text(value), PgParam::Int(number)}});
  }
  if (!request_id.empty()) {
    statements.push_back({"INSERT INTO submit_requests (request_id, number) VALUES ($1, $2)",
                          {PgParam::Text(request_id), PgParam::Int(number)}});
  }
  RETURN_IF_ERROR(Write(std::move(statements)));
  if (!request_id.empty()) {
    requests_[request_id] = job.id();
    request_of_job_[job.id()] = request_id;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PgJobStore::FindRequest(const std::string& request_id) {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? std::string() : it->second;
}

absl::Status PgJobStore::RecordTransition(const v1::Job& job, int drop, int from) {
  std::vector<PgStatement> statements = {Snapshot(job)};
  if (drop > 0) {
    statements.push_back(
        {"DELETE FROM transitions WHERE seq IN (SELECT seq FROM transitions "
         "WHERE job_id = $1 ORDER BY seq DESC LIMIT $2)",
         {PgParam::Text(job.id()), PgParam::Int(drop)}});
  }
  for (int i = from; i < job.history_size(); ++i) {
    statements.push_back(Transition(job.id(), job.history(i)));
  }
  return Write(std::move(statements));
}

absl::Status PgJobStore::Update(const v1::Job& job) { return Write({Snapshot(job)}); }

absl::Status PgJobStore::Delete(const std::string& job_id) {
  const PgParam number = PgParam::Int(JobNumberOf(job_id));
  if (auto it = request_of_job_.find(job_id); it != request_of_job_.end()) {
    requests_.erase(it->second);
    request_of_job_.erase(it);
  }
  return Write({{"DELETE FROM transitions WHERE job_id = $1", {PgParam::Text(job_id)}},
                {"DELETE FROM job_labels WHERE number = $1", {number}},
                {"DELETE FROM submit_requests WHERE number = $1", {number}},
                {"DELETE FROM jobs WHERE id = $1", {PgParam::Text(job_id)}}});
}

absl::Status PgJobStore::PutWorkerHealth(const v1::WorkerHealth& record) {
  return Write(
      {{"INSERT INTO worker_health VALUES ($1, $2) "
        "ON CONFLICT (worker_id) DO UPDATE SET record = excluded.record",
        {PgParam::Text(record.worker_id()), PgParam::Bytes(record.SerializeAsString())}}});
}

absl::Status PgJobStore::Retire(const RetiredJob& job) {
  return Write({{"UPDATE jobs SET resident = 0, ended_unix_ms = $1, workers = $2 WHERE id = $3",
                 {PgParam::Int(job.ended_unix_ms), PgParam::Text(absl::StrJoin(job.workers, " ")),
                  PgParam::Text(job.id)}}});
}

absl::Status PgJobStore::Revive(const std::string& job_id) {
  return Write({{"UPDATE jobs SET resident = 1, ended_unix_ms = 0, workers = '' WHERE id = $1",
                 {PgParam::Text(job_id)}}});
}

absl::StatusOr<std::vector<v1::WorkerHealth>> PgJobStore::LoadWorkerHealth() {
  RETURN_IF_ERROR(Flush(kFlushTimeout));
  MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(PgResult rows, Read("SELECT worker_id, record FROM worker_health "
                                       "ORDER BY worker_id"));
  std::vector<v1::WorkerHealth> records(rows.rows());
  for (int r = 0; r < rows.rows(); ++r) {
    if (!records[r].ParseFromString(rows.Bytes(r, 1))) {
      return absl::DataLossError(
          absl::StrCat("worker ", rows.Text(r, 0), " has an unreadable health record"));
    }
  }
  return records;
}

absl::StatusOr<std::vector<v1::Job>> PgJobStore::LoadResident() {
  RETURN_IF_ERROR(Flush(kFlushTimeout));
  MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(PgResult rows, Read("SELECT id, snapshot FROM jobs "
                                       "WHERE resident = 1 ORDER BY number"));
  std::vector<v1::Job> jobs(rows.rows());
  std::map<std::string, size_t> index;
  for (int r = 0; r < rows.rows(); ++r) {
    if (!ParseJobSnapshot(rows.Bytes(r, 1), &jobs[r])) {
      return absl::DataLossError(
          absl::StrCat("job ", rows.Text(r, 0), " has an unreadable snapshot"));
    }
    index[jobs[r].id()] = r;
  }
  ASSIGN_OR_RETURN(PgResult history, Read("SELECT t.job_id, t.change FROM transitions t "
                                          "JOIN jobs j ON j.id = t.job_id "
                                          "WHERE j.resident = 1 ORDER BY t.seq"));
  for (int r = 0; r < history.rows(); ++r) {
    auto it = index.find(history.Text(r, 0));
    if (it == index.end()) continue;
    if (!jobs[it->second].add_history()->ParseFromString(history.Bytes(r, 1))) {
      return absl::DataLossError(absl::StrCat("job ", it->first, " has an unreadable transition"));
    }
  }
  return jobs;
}

absl::StatusOr<std::vector<RetiredJob>> PgJobStore::LoadRetired() {
  RETURN_IF_ERROR(Flush(kFlushTimeout));
  MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(PgResult rows, Read("SELECT number, id, state, ended_unix_ms, workers, snapshot "
                                       "FROM jobs WHERE resident = 0 ORDER BY number"));
  std::vector<RetiredJob> jobs;
  for (int r = 0; r < rows.rows(); ++r) {
    jobs.push_back({rows.Int(r, 0), rows.Text(r, 1), static_cast<v1::JobState>(rows.Int(r, 2)),
                    rows.Int(r, 3), absl::StrSplit(rows.Text(r, 4), ' ', absl::SkipEmpty()),
                    RevisionOfSnapshot(rows.Bytes(r, 5))});
  }
  return jobs;
}

absl::Status PgJobStore::ReadHistory(v1::Job* job) {
  ASSIGN_OR_RETURN(PgResult rows,
                   Read("SELECT change FROM transitions WHERE job_id = $1 ORDER BY seq",
                        {PgParam::Text(job->id())}));
  for (int r = 0; r < rows.rows(); ++r) {
    if (!job->add_history()->ParseFromString(rows.Bytes(r, 0))) {
      return absl::DataLossError(absl::StrCat("job ", job->id(), " has an unreadable transition"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> PgJobStore::Load(const std::string& job_id) {
  RETURN_IF_ERROR(Flush(kFlushTimeout));
  MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(PgResult rows,
                   Read("SELECT snapshot FROM jobs WHERE id = $1", {PgParam::Text(job_id)}));
  if (rows.rows() == 0) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  v1::Job job;
  if (!ParseJobSnapshot(rows.Bytes(0, 0), &job)) {
    return absl::DataLossError(absl::StrCat("job ", job_id, " has an unreadable snapshot"));
  }
  RETURN_IF_ERROR(ReadHistory(&job));
  return job;
}

absl::StatusOr<std::vector<v1::Job>> PgJobStore::ListRetired(const RetiredQuery& query) {
  // A job's name is its id without "-<number>".
  std::string sql =
      absl::StrCat("SELECT snapshot FROM jobs WHERE ", query.resident_too ? "TRUE" : "resident = 0",
                   " AND number < $1::bigint "
                   "AND substr(id, 1, length($2::text)) = $2::text "
                   "AND length($2::text) < length(id) - length(number::text) ");
  if (!query.states.empty()) {
    std::vector<std::string> states;
    for (v1::JobState state : query.states) states.push_back(absl::StrCat(int{state}));
    absl::StrAppend(&sql, "AND state IN (", absl::StrJoin(states, ", "), ") ");
  }
  std::vector<PgParam> params = {PgParam::Int(query.before_number),
                                 PgParam::Text(query.name_prefix), PgParam::Int(query.limit)};
  // Each label is a pair of parameters from $4 on.
  for (const auto& [key, value] : query.labels) {
    absl::StrAppend(&sql, "AND number IN (SELECT number FROM job_labels WHERE key = $",
                    params.size() + 1, "::text AND value = $", params.size() + 2, "::text) ");
    params.push_back(PgParam::Text(key));
    params.push_back(PgParam::Text(value));
  }
  absl::StrAppend(&sql, "ORDER BY number DESC LIMIT $3::bigint");
  RETURN_IF_ERROR(Flush(kFlushTimeout));
  MutexLock lock(&read_mu_);
  ASSIGN_OR_RETURN(PgResult rows, Read(sql, params));
  std::vector<v1::Job> jobs(rows.rows());
  for (int r = 0; r < rows.rows(); ++r) {
    if (!ParseJobSnapshot(rows.Bytes(r, 0), &jobs[r])) {
      return absl::DataLossError("a stored job has an unreadable snapshot");
    }
  }
  for (v1::Job& job : jobs) RETURN_IF_ERROR(ReadHistory(&job));
  return jobs;
}

}  // namespace ringmaster
