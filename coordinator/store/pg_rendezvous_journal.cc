#include "coordinator/store/pg_rendezvous_journal.h"

#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<PgRendezvousJournal>> PgRendezvousJournal::Start(
    const std::string& conninfo, const std::string& password, PgFence fence) {
  PgWriterOptions options;
  options.conninfo = conninfo;
  options.password = password;
  options.fence = std::move(fence);
  ASSIGN_OR_RETURN(std::unique_ptr<PgWriter> writer,
                   PgWriter::Start(std::move(options), absl::Seconds(10)));
  return std::unique_ptr<PgRendezvousJournal>(
      new PgRendezvousJournal(conninfo, password, std::move(writer)));
}

absl::StatusOr<int64_t> PgRendezvousJournal::Put(const ScopeId& scope, const std::string& key,
                                                 const std::string& value) {
  return writer_->Submit(
      {{"INSERT INTO rendezvous_keys VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (job_id, attempt, key) DO UPDATE SET value = excluded.value",
        {PgParam::Text(scope.job_id), PgParam::Int(scope.attempt), PgParam::Bytes(key),
         PgParam::Bytes(value)}}});
}

absl::Status PgRendezvousJournal::WaitDurable(int64_t ticket) {
  return writer_->WaitDurable(ticket, kDurableTimeout);
}

void PgRendezvousJournal::Drop(const ScopeId& scope) {
  absl::StatusOr<int64_t> queued =
      writer_->Submit({{"DELETE FROM rendezvous_keys WHERE job_id = $1 AND attempt = $2",
                        {PgParam::Text(scope.job_id), PgParam::Int(scope.attempt)}}});
  if (!queued.ok()) {
    // Its rows go when the next leader restores the scopes.
    spdlog::warn("cannot forget the rendezvous keys of attempt {} of job {}: {}", scope.attempt,
                 scope.job_id, queued.status().ToString());
  }
}

absl::StatusOr<ScopesValues> PgRendezvousJournal::Load() {
  ASSIGN_OR_RETURN(std::unique_ptr<PgDb> db,
                   PgDb::Connect(conninfo_, absl::Seconds(10), password_));
  ASSIGN_OR_RETURN(PgResult rows,
                   db->Query("SELECT job_id, attempt, key, value FROM rendezvous_keys"));
  ScopesValues scopes;
  for (int r = 0; r < rows.rows(); ++r) {
    ScopeId scope{rows.Text(r, 0), static_cast<int>(rows.Int(r, 1))};
    scopes[scope][rows.Bytes(r, 2)] = rows.Bytes(r, 3);
  }
  return scopes;
}

}  // namespace ringmaster
