#include "coordinator/store/pg_writer.h"

#include <algorithm>
#include <random>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// One row per writer: the last submission its commits hold.
constexpr char kProgressTable[] =
    "CREATE TABLE IF NOT EXISTS writer_progress ("
    "  writer TEXT PRIMARY KEY,"
    "  seq BIGINT NOT NULL,"
    "  updated TIMESTAMPTZ NOT NULL DEFAULT now());"
    // Rows of writers long gone.
    "DELETE FROM writer_progress WHERE updated < now() - interval '7 days';";

constexpr absl::Duration kIdleCheck = absl::Seconds(1);

std::string NewWriterId() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

}  // namespace

absl::StatusOr<std::unique_ptr<PgWriter>> PgWriter::Start(PgWriterOptions options,
                                                          absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgDb> db,
                   PgDb::Connect(options.conninfo, timeout, options.password));
  // One coordinator at a time (the schema's lock): CREATE TABLE races.
  RETURN_IF_ERROR(db->Transaction([&db] {
    return db->Exec(absl::StrCat("SELECT pg_advisory_xact_lock(7070);", kProgressTable));
  }));
  std::unique_ptr<PgWriter> writer(new PgWriter(std::move(options), std::move(db), NewWriterId()));
  writer->thread_ = std::thread([w = writer.get()] { w->Run(); });
  return writer;
}

PgWriter::PgWriter(PgWriterOptions options, std::unique_ptr<PgDb> db, std::string id)
    : options_(std::move(options)), id_(std::move(id)), db_(std::move(db)) {}

PgWriter::~PgWriter() {
  {
    MutexLock lock(&mu_);
    closing_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<int64_t> PgWriter::Submit(std::vector<PgStatement> transaction) {
  MutexLock lock(&mu_);
  if (!stopped_.ok()) return stopped_;
  if (queue_.size() >= options_.max_pending) {
    return absl::ResourceExhaustedError(
        absl::StrCat(queue_.size(), " writes wait for PostgreSQL, the most held"));
  }
  queue_.push_back(std::make_shared<const Pending>(Pending{++submitted_, std::move(transaction)}));
  return submitted_;
}

absl::Status PgWriter::WaitDurable(int64_t seq, absl::Duration timeout) {
  MutexLock lock(&mu_);
  auto done = [&]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return durable_ >= seq || !stopped_.ok(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("PostgreSQL has not committed write ", seq,
                                                    " within ", absl::FormatDuration(timeout),
                                                    connected_ ? "" : " (reconnecting)"));
  }
  return durable_ >= seq ? absl::OkStatus() : stopped_;
}

int64_t PgWriter::submitted() const {
  MutexLock lock(&mu_);
  return submitted_;
}

int64_t PgWriter::durable() const {
  MutexLock lock(&mu_);
  return durable_;
}

int64_t PgWriter::commits() const {
  MutexLock lock(&mu_);
  return commits_;
}

bool PgWriter::connected() const {
  MutexLock lock(&mu_);
  return connected_;
}

void PgWriter::Run() {
  for (;;) {
    std::vector<std::shared_ptr<const Pending>> group;
    {
      MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(this, &PgWriter::HasWork), kIdleCheck);
      if (closing_) return;
      const size_t n = std::min(queue_.size(), options_.max_group);
      group.assign(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
    }
    // Idle, it still looks at the connection, so that connected() is true
    // to the second.
    absl::Status committed = group.empty() ? db_->Exec("SELECT 1") : Commit(group);
    if (absl::IsUnavailable(committed)) {
      absl::StatusOr<int64_t> held = Reconnect();
      if (!held.ok()) return;  // closing
      // A commit whose answer was lost may have happened: what it held is
      // done, and only the rest is tried again.
      MutexLock lock(&mu_);
      while (!queue_.empty() && queue_.front()->seq <= *held) queue_.pop_front();
      durable_ = std::max(durable_, *held);
      continue;
    }
    if (group.empty()) continue;
    MutexLock lock(&mu_);
    if (!committed.ok()) {
      spdlog::error("PostgreSQL writer stopped: {}", committed.ToString());
      stopped_ = committed;
      return;
    }
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(group.size()));
    durable_ = group.back()->seq;
    ++commits_;
  }
}

absl::Status PgWriter::Commit(const std::vector<std::shared_ptr<const Pending>>& group) {
  return db_->Transaction([&]() -> absl::Status {
    if (options_.fence) RETURN_IF_ERROR(options_.fence(db_.get()));
    for (const std::shared_ptr<const Pending>& pending : group) {
      for (const PgStatement& statement : pending->statements) {
        RETURN_IF_ERROR(db_->Query(statement.sql, statement.params).status());
      }
    }
    return db_
        ->Query(
            "INSERT INTO writer_progress (writer, seq) VALUES ($1, $2) "
            "ON CONFLICT (writer) DO UPDATE SET seq = excluded.seq, updated = now()",
            {PgParam::Text(id_), PgParam::Int(group.back()->seq)})
        .status();
  });
}

absl::StatusOr<int64_t> PgWriter::Reconnect() {
  {
    MutexLock lock(&mu_);
    connected_ = false;
  }
  absl::Duration backoff = absl::Milliseconds(50);
  for (;;) {
    {
      MutexLock lock(&mu_);
      auto closing = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closing_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&closing), backoff)) {
        return absl::CancelledError("closing");
      }
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
    absl::StatusOr<std::unique_ptr<PgDb>> db =
        PgDb::Connect(options_.conninfo, absl::Seconds(5), options_.password);
    if (!db.ok()) continue;
    absl::StatusOr<PgResult> held =
        (*db)->Query("SELECT seq FROM writer_progress WHERE writer = $1", {PgParam::Text(id_)});
    if (!held.ok()) continue;
    db_ = *std::move(db);
    spdlog::info("PostgreSQL writer: reconnected");
    MutexLock lock(&mu_);
    connected_ = true;
    return held->rows() == 1 ? held->Int(0, 0) : int64_t{0};
  }
}

}  // namespace ringmaster
