#include "coordinator/store/pg_db.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ringmaster {
namespace {

// The first line of a statement, enough to name it in an error.
std::string Named(const std::string& sql) {
  const absl::string_view line = absl::string_view(sql).substr(0, sql.find('\n'));
  return std::string(line.size() > 80 ? line.substr(0, 77) : line) +
         (line.size() > 80 || line.size() < sql.size() ? "..." : "");
}

// By SQLSTATE class (PostgreSQL's Appendix A).
absl::StatusCode CodeOf(absl::string_view state) {
  if (state == "40001" || state == "40P01") return absl::StatusCode::kAborted;
  if (state == "23505") return absl::StatusCode::kAlreadyExists;
  if (absl::StartsWith(state, "08") || absl::StartsWith(state, "57P")) {
    return absl::StatusCode::kUnavailable;  // connection exceptions, shutdowns
  }
  if (absl::StartsWith(state, "23") || absl::StartsWith(state, "42") ||
      absl::StartsWith(state, "25") || absl::StartsWith(state, "22")) {
    return absl::StatusCode::kFailedPrecondition;
  }
  return absl::StatusCode::kInternal;
}

}  // namespace

PgParam PgParam::Int(int64_t value) { return {absl::StrCat(value), false}; }
PgParam PgParam::Text(std::string value) { return {std::move(value), false}; }
PgParam PgParam::Bytes(std::string value) { return {std::move(value), true}; }

int64_t PgResult::Int(int row, int col) const {
  if (null(row, col)) return 0;
  const unsigned char* p =
      reinterpret_cast<const unsigned char*>(PQgetvalue(result_.get(), row, col));
  const int length = PQgetlength(result_.get(), row, col);
  uint64_t value = 0;
  for (int i = 0; i < length; ++i) value = (value << 8) | p[i];  // network order
  switch (length) {
    case 2:
      return static_cast<int16_t>(value);
    case 4:
      return static_cast<int32_t>(value);
    default:
      return static_cast<int64_t>(value);
  }
}

bool PgResult::Bool(int row, int col) const {
  return !null(row, col) && PQgetlength(result_.get(), row, col) == 1 &&
         PQgetvalue(result_.get(), row, col)[0] != 0;
}

std::string PgResult::Bytes(int row, int col) const {
  return std::string(PQgetvalue(result_.get(), row, col), PQgetlength(result_.get(), row, col));
}

absl::StatusOr<std::unique_ptr<PgDb>> PgDb::Connect(const std::string& conninfo,
                                                    absl::Duration timeout,
                                                    const std::string& password) {
  const std::string seconds = absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(timeout)));
  // The caller's string first; "expand_dbname" lets it be a URI too.
  // A server that stops answering (its link cut) fails the statement
  // within about 10 s, instead of at TCP's retransmission limit.
  std::vector<const char*> keywords = {"dbname",          "connect_timeout",     "application_name",
                                       "keepalives_idle", "keepalives_interval", "keepalives_count",
                                       "tcp_user_timeout"};
  std::vector<const char*> values = {
      conninfo.c_str(), seconds.c_str(), "ringmaster-coordinator", "5", "2", "3", "10000"};
  if (!password.empty()) {
    keywords.push_back("password");
    values.push_back(password.c_str());
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  std::unique_ptr<PgDb> db(
      new PgDb(PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1)));
  if (db->conn_ == nullptr) return absl::ResourceExhaustedError("libpq: out of memory");
  // The server's notices ("relation ... already exists, skipping") are not
  // for the coordinator's log.
  PQsetNoticeProcessor(
      db->conn_.get(), [](void*, const char*) {}, nullptr);
  if (!db->connected()) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to PostgreSQL: ",
                     absl::StripTrailingAsciiWhitespace(PQerrorMessage(db->conn_.get()))));
  }
  return db;
}

absl::Status PgDb::Reset() {
  PQreset(conn_.get());
  depth_ = 0;
  if (connected()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("cannot connect to PostgreSQL again: ",
                   absl::StripTrailingAsciiWhitespace(PQerrorMessage(conn_.get()))));
}

absl::Status PgDb::Check(const PGresult* result, const std::string& sql) const {
  const ExecStatusType status = result == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(result);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
    return absl::OkStatus();
  }
  const char* state = result == nullptr ? nullptr : PQresultErrorField(result, PG_DIAG_SQLSTATE);
  absl::string_view message = result != nullptr ? PQresultErrorMessage(result) : "";
  if (message.empty()) message = PQerrorMessage(conn_.get());
  message = absl::StripTrailingAsciiWhitespace(message);
  absl::StatusCode code = state != nullptr ? CodeOf(state) : absl::StatusCode::kInternal;
  if (!connected()) code = absl::StatusCode::kUnavailable;
  return absl::Status(code, absl::StrCat(Named(sql), ": ", message));
}

absl::Status PgDb::Exec(const std::string& sql) {
  // Of several statements, PQexec returns the last one's result; a failure
  // ends the string there, and is that result.
  std::unique_ptr<PGresult, void (*)(PGresult*)> result(PQexec(conn_.get(), sql.c_str()), &PQclear);
  return Check(result.get(), sql);
}

absl::StatusOr<PgResult> PgDb::Query(const std::string& sql, const std::vector<PgParam>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const PgParam& p : params) {
    values.push_back(p.value.data());
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.binary ? 1 : 0);
  }
  // Parameter types come from the statement; rows come back in binary.
  std::unique_ptr<PGresult, void (*)(PGresult*)> result(
      PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(params.size()), nullptr,
                   values.data(), lengths.data(), formats.data(), /*resultFormat=*/1),
      &PQclear);
  if (absl::Status s = Check(result.get(), sql); !s.ok()) return s;
  return PgResult(result.release());
}

absl::Status PgPool::Run(const std::function<absl::Status(PgDb*)>& body) {
  absl::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::unique_ptr<PgDb>> db = Borrow();
    if (!db.ok()) return db.status();
    status = body(db->get());
    if (!(*db)->connected() || absl::IsUnavailable(status)) {
      db->reset();  // lost: the next try opens another
      Return(nullptr);
      continue;
    }
    Return(*std::move(db));
    return status;
  }
  return status;
}

absl::StatusOr<std::unique_ptr<PgDb>> PgPool::Borrow() {
  {
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &PgPool::CanBorrow));
    if (!idle_.empty()) {
      std::unique_ptr<PgDb> db = std::move(idle_.back());
      idle_.pop_back();
      return db;
    }
    ++open_;
  }
  absl::StatusOr<std::unique_ptr<PgDb>> db =
      PgDb::Connect(options_.conninfo, options_.connect_timeout, options_.password);
  if (!db.ok()) Return(nullptr);
  return db;
}

void PgPool::Return(std::unique_ptr<PgDb> db) {
  MutexLock lock(&mu_);
  if (db == nullptr) {
    --open_;
  } else {
    idle_.push_back(std::move(db));
  }
}

}  // namespace ringmaster
