// A thin RAII layer over SQLite: one connection, prepared statements, and
// every error turned into an absl::Status naming the statement.
#ifndef RINGMASTER_COORDINATOR_STORE_SQLITE_DB_H_
#define RINGMASTER_COORDINATOR_STORE_SQLITE_DB_H_

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

class SqliteStatement;

// Not thread-safe: one owner uses it at a time.
class SqliteDb {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements that return no rows.
  absl::Status Exec(const std::string& sql);
  absl::StatusOr<SqliteStatement> Prepare(const std::string& sql);

  // Runs `body` inside a savepoint: all of it or, when it fails, none of
  // it. Transactions nest; the outermost commits.
  template <typename F>
  absl::Status Transaction(F body) {
    if (auto s = Exec("SAVEPOINT tx"); !s.ok()) return s;
    ++depth_;
    absl::Status s = body();
    --depth_;
    if (!s.ok()) {
      Exec("ROLLBACK TO tx; RELEASE tx").IgnoreError();
      return s;
    }
    if (s = Exec("RELEASE tx"); s.ok() && depth_ == 0) commits_.fetch_add(1);
    return s;
  }

  // Outermost transactions committed so far; readable from any thread.
  int64_t commits() const { return commits_.load(); }

  absl::Status Error(const std::string& what) const;

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  int depth_ = 0;
  std::atomic<int64_t> commits_{0};
};

// A prepared statement; bind parameters are 1-based, columns 0-based.
class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  ~SqliteStatement();

  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, const std::string& text);
  SqliteStatement& BindBlob(int index, const std::string& bytes);

  // True when a row is ready, false when done.
  absl::StatusOr<bool> Step();
  // Steps once and expects no row.
  absl::Status Run();

  int64_t ColumnInt(int col) const;
  std::string ColumnText(int col) const;
  std::string ColumnBlob(int col) const;

 private:
  friend class SqliteDb;
  SqliteStatement(const SqliteDb* db, sqlite3_stmt* stmt, std::string sql)
      : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  const SqliteDb* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_SQLITE_DB_H_
