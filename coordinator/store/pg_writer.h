// Writes to PostgreSQL from a thread of its own, so that no caller waits on
// the network: a caller submits a transaction (its statements) and goes
// on; the thread commits what is waiting, in submission order, several
// submissions to one PostgreSQL transaction (group commit), and WaitDurable
// tells when a submission is committed, which on PostgreSQL means durable.
//
//   - When the connection is lost the thread reconnects with back-off and
//     goes on where it stopped. Each commit also records, in one row per
//     writer, the last submission it holds; after a reconnect that row says
//     whether a commit whose answer was lost happened, so that nothing is
//     applied twice.
//   - With a fence, every commit is fenced (coordinator/pg_fence.h): once
//     another coordinator holds the lease, nothing more is written and every
//     waiter gets FAILED_PRECONDITION "not the leader".
//   - A statement the server refuses otherwise stops the writer too (a
//     statement that cannot be applied is a bug); its error is returned to
//     every waiter from then on.
#ifndef RINGMASTER_COORDINATOR_STORE_PG_WRITER_H_
#define RINGMASTER_COORDINATOR_STORE_PG_WRITER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "coordinator/store/pg_db.h"
#include "coordinator/store/pg_fence.h"

namespace ringmaster {

struct PgWriterOptions {
  std::string conninfo;
  std::string password;         // empty: libpq's own (PGPASSFILE, ~/.pgpass)
  PgFence fence;                // run inside every commit; empty: none
  size_t max_pending = 100000;  // submissions waiting; more are refused
  size_t max_group = 1000;      // submissions per PostgreSQL transaction
  absl::Duration max_backoff = absl::Seconds(2);
};

struct PgStatement {
  std::string sql;
  std::vector<PgParam> params;
};

// Thread-safe.
class PgWriter {
 public:
  // Connects (bounded by `timeout`) and starts the thread.
  static absl::StatusOr<std::unique_ptr<PgWriter>> Start(PgWriterOptions options,
                                                         absl::Duration timeout);
  // Stops the thread; submissions not yet committed are dropped.
  ~PgWriter();

  // Queues a transaction; its sequence number (from 1). RESOURCE_EXHAUSTED
  // when max_pending are waiting (the database is away), and the writer's
  // error once it has stopped.
  absl::StatusOr<int64_t> Submit(std::vector<PgStatement> transaction);
  // Waits until submission `seq` is committed: OK; the writer's error once
  // it has stopped; DEADLINE_EXCEEDED after `timeout`.
  absl::Status WaitDurable(int64_t seq, absl::Duration timeout);

  int64_t submitted() const;
  int64_t durable() const;
  int64_t commits() const;  // PostgreSQL transactions committed
  // Whether its connection is up (false while it reconnects); an idle
  // writer looks every second.
  bool connected() const;

 private:
  struct Pending {
    int64_t seq = 0;
    std::vector<PgStatement> statements;
  };
  PgWriter(PgWriterOptions options, std::unique_ptr<PgDb> db, std::string id);
  void Run();
  // Commits `group` in one transaction: OK, UNAVAILABLE (reconnect and
  // retry), or an error that stops the writer.
  absl::Status Commit(const std::vector<std::shared_ptr<const Pending>>& group);
  // Reconnects until it can, or the writer is closing; the last submission
  // committed before, by the progress row.
  absl::StatusOr<int64_t> Reconnect();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || closing_; }

  const PgWriterOptions options_;
  const std::string id_;      // this writer's row in writer_progress
  std::unique_ptr<PgDb> db_;  // the thread's alone

  mutable Mutex mu_;
  // Shared with the thread's group in flight, which takes no copy.
  std::deque<std::shared_ptr<const Pending>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t durable_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
  bool connected_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status stopped_ ABSL_GUARDED_BY(mu_);  // not OK: the writer has stopped
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_PG_WRITER_H_
