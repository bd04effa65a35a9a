// A thin RAII layer over one libpq connection to PostgreSQL: statements
// with parameters, results read by row and column, transactions, and every
// error turned into an absl::Status that names the statement and carries
// the server's message. The codes say what a caller may do about it:
//
//   UNAVAILABLE          the connection is lost or cannot be made: reconnect
//                        and retry with back-off;
//   ABORTED              a serialization failure or deadlock: retry the
//                        transaction;
//   ALREADY_EXISTS       a unique constraint was violated;
//   FAILED_PRECONDITION  the server refused it otherwise (a check, a missing
//                        table, a read-only standby);
//   INTERNAL             anything else.
#ifndef RINGMASTER_COORDINATOR_STORE_PG_DB_H_
#define RINGMASTER_COORDINATOR_STORE_PG_DB_H_

#include <postgresql/libpq-fe.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace ringmaster {

// A statement's parameter: text (integers are sent as their decimal
// text, for the server to convert) or bytes (bytea, sent in binary).
struct PgParam {
  static PgParam Int(int64_t value);
  static PgParam Text(std::string value);
  static PgParam Bytes(std::string value);
  std::string value;
  bool binary = false;
};

// The rows of a query, in binary form; rows and columns 0-based.
class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result, &PQclear) {}
  int rows() const { return PQntuples(result_.get()); }
  bool null(int row, int col) const { return PQgetisnull(result_.get(), row, col) != 0; }
  // A smallint, integer or bigint column; 0 when null.
  int64_t Int(int row, int col) const;
  bool Bool(int row, int col) const;
  // A text or bytea column's bytes.
  std::string Bytes(int row, int col) const;
  std::string Text(int row, int col) const { return Bytes(row, col); }

 private:
  std::unique_ptr<PGresult, void (*)(PGresult*)> result_;
};

// Not thread-safe: one owner uses it at a time.
class PgDb {
 public:
  // `conninfo` is a libpq connection string ("host=... dbname=...") or URI
  // ("postgresql://..."); the password comes from it, PGPASSFILE or
  // ~/.pgpass, unless `password` is given. `timeout` bounds the
  // connection's setup.
  static absl::StatusOr<std::unique_ptr<PgDb>> Connect(const std::string& conninfo,
                                                       absl::Duration timeout = absl::Seconds(10),
                                                       const std::string& password = "");
  PgDb(const PgDb&) = delete;
  PgDb& operator=(const PgDb&) = delete;

  // Runs one or more statements without parameters, discarding any rows.
  absl::Status Exec(const std::string& sql);
  // Runs one statement, `$1`... bound to `params`.
  absl::StatusOr<PgResult> Query(const std::string& sql, const std::vector<PgParam>& params = {});

  // Runs `body` in a transaction: all of it or, when it fails, none of it.
  // Transactions nest (savepoints); the outermost commits, and its COMMIT
  // returns once the server has made it durable.
  template <typename F>
  absl::Status Transaction(F body) {
    const bool outer = depth_ == 0;
    if (auto s = Exec(outer ? "BEGIN" : "SAVEPOINT tx"); !s.ok()) return s;
    ++depth_;
    absl::Status s = body();
    --depth_;
    if (!s.ok()) {
      Exec(outer ? "ROLLBACK" : "ROLLBACK TO SAVEPOINT tx; RELEASE SAVEPOINT tx").IgnoreError();
      return s;
    }
    return Exec(outer ? "COMMIT" : "RELEASE SAVEPOINT tx");
  }

  // Connects again with the same parameters (after a lost connection).
  absl::Status Reset();

  // Whether the connection is still up (as of the last statement).
  bool connected() const { return PQstatus(conn_.get()) == CONNECTION_OK; }

 private:
  explicit PgDb(PGconn* conn) : conn_(conn, &PQfinish) {}
  // The status of a finished statement: OK, or its error as above.
  absl::Status Check(const PGresult* result, const std::string& sql) const;

  std::unique_ptr<PGconn, void (*)(PGconn*)> conn_;
  int depth_ = 0;
};

// Connections to one database for callers on many threads: a call borrows
// an idle connection (or opens one, up to `max_connections`; beyond, it
// waits for one), and no lock is held while its statements run.
// Thread-safe.
class PgPool {
 public:
  struct Options {
    std::string conninfo;
    std::string password;  // empty: libpq's own
    int max_connections = 4;
    absl::Duration connect_timeout = absl::Seconds(10);
  };
  explicit PgPool(Options options) : options_(std::move(options)) {}

  // Runs `body` on a connection. When the connection turns out to be lost
  // (UNAVAILABLE), it is dropped and `body` runs once more on a new one, so
  // `body` must be safe to run twice (a transaction is).
  absl::Status Run(const std::function<absl::Status(PgDb*)>& body);

 private:
  absl::StatusOr<std::unique_ptr<PgDb>> Borrow();
  bool CanBorrow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !idle_.empty() || open_ < options_.max_connections;
  }
  void Return(std::unique_ptr<PgDb> db);

  const Options options_;
  Mutex mu_;
  std::vector<std::unique_ptr<PgDb>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // idle or borrowed
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_PG_DB_H_
