#include "coordinator/store/sqlite_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  // The owner's only, before SQLite creates it 0644; its journal files take
  // the database's mode.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || fchmod(fd, 0600) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot create SQLite database ", path, ": ", strerror(error)));
  }
  close(fd);
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(
        absl::StrCat("cannot open SQLite database ", path, ": ", message));
  }
  sqlite3_busy_timeout(db, 5000);
  return std::unique_ptr<SqliteDb>(new SqliteDb(db));
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

absl::Status SqliteDb::Error(const std::string& what) const {
  return absl::InternalError(absl::StrCat("SQLite: ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status SqliteDb::Exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(absl::StrCat("SQLite: ", sql, ": ", message));
  }
  return absl::OkStatus();
}

absl::StatusOr<SqliteStatement> SqliteDb::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return Error(absl::StrCat("prepare ", sql));
  }
  return SqliteStatement(this, stmt, sql);
}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)) {
  other.stmt_ = nullptr;
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, const std::string& text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteStatement& SqliteStatement::BindBlob(int index, const std::string& bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}

absl::StatusOr<bool> SqliteStatement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(sql_);
}

absl::Status SqliteStatement::Run() {
  auto row = Step();
  if (!row.ok()) return row.status();
  return absl::OkStatus();
}

int64_t SqliteStatement::ColumnInt(int col) const { return sqlite3_column_int64(stmt_, col); }

std::string SqliteStatement::ColumnText(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  return text ? std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, col))
              : std::string();
}

std::string SqliteStatement::ColumnBlob(int col) const {
  const void* blob = sqlite3_column_blob(stmt_, col);
  return blob ? std::string(static_cast<const char*>(blob), sqlite3_column_bytes(stmt_, col))
              : std::string();
}

}  // namespace ringmaster
