#include "coordinator/store/leader_lease.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster {

absl::Status LeaderLease::CreateTable(PgDb* db) {
  // Coordinators starting together would race in CREATE TABLE: one at a
  // time, under the lock the schema's migrations take.
  return db->Transaction([db] {
    return db->Exec(
        "SELECT pg_advisory_xact_lock(7070);"
        "CREATE TABLE IF NOT EXISTS leader_lease ("
        "  id INTEGER PRIMARY KEY CHECK (id = 1),"
        "  term BIGINT NOT NULL,"
        "  renewals BIGINT NOT NULL,"
        "  holder TEXT NOT NULL,"
        "  address TEXT NOT NULL);"
        "INSERT INTO leader_lease VALUES (1, 0, 0, '', '') ON CONFLICT (id) DO NOTHING;");
  });
}

absl::StatusOr<LeaderLease::Row> LeaderLease::Read() {
  ASSIGN_OR_RETURN(PgResult rows, db_->Query("SELECT term, renewals, holder, address "
                                             "FROM leader_lease WHERE id = 1"));
  if (rows.rows() != 1) return absl::FailedPreconditionError("the leader_lease row is missing");
  return Row{rows.Int(0, 0), rows.Int(0, 1), rows.Text(0, 2), rows.Text(0, 3)};
}

void LeaderLease::Follow(const Row& row, absl::Time now) {
  if (row.term != seen_.term || row.renewals != seen_.renewals || row.holder != seen_.holder ||
      seen_at_ == absl::InfinitePast()) {
    seen_ = row;
    seen_at_ = now;
  }
  state_ = {false, row.term, row.holder, row.holder.empty() ? "" : row.address};
}

absl::StatusOr<LeaseState> LeaderLease::Step() {
  const absl::Time now = clock_->Now();
  return state_.leader ? Renew(now) : Watch(now);
}

absl::StatusOr<LeaseState> LeaderLease::Renew(absl::Time now) {
  absl::StatusOr<PgResult> renewed = db_->Query(
      "UPDATE leader_lease SET renewals = renewals + 1 "
      "WHERE id = 1 AND term = $1 AND holder = $2 RETURNING renewals",
      {PgParam::Int(state_.term), PgParam::Text(options_.id)});
  if (!renewed.ok()) {
    if (now - renewed_ >= options_.timeout) {
      spdlog::error("leader lease: not renewed for {} ({}): stepping down",
                    absl::FormatDuration(now - renewed_), renewed.status().ToString());
      state_ = {false, state_.term, "", ""};
      seen_at_ = absl::InfinitePast();
    }
    return renewed.status();
  }
  if (renewed->rows() == 1) {
    renewed_ = now;
    return state_;
  }
  // Another coordinator took over.
  ASSIGN_OR_RETURN(Row row, Read());
  spdlog::warn("leader lease: term {} taken by {} ({}): stepping down", row.term, row.holder,
               row.address);
  seen_at_ = absl::InfinitePast();
  Follow(row, now);
  return state_;
}

absl::StatusOr<LeaseState> LeaderLease::Watch(absl::Time now) {
  ASSIGN_OR_RETURN(Row row, Read());
  Follow(row, now);
  if (!row.holder.empty() && now - seen_at_ < options_.timeout) return state_;
  // Free, or its holder has not renewed for the timeout: take over what
  // was seen, unless it changed since.
  ASSIGN_OR_RETURN(PgResult taken,
                   db_->Query("UPDATE leader_lease SET term = term + 1, renewals = 0, "
                              "holder = $1, address = $2 "
                              "WHERE id = 1 AND term = $3 AND renewals = $4 RETURNING term",
                              {PgParam::Text(options_.id), PgParam::Text(options_.address),
                               PgParam::Int(row.term), PgParam::Int(row.renewals)}));
  if (taken.rows() != 1) return state_;  // someone else was quicker; seen at the next step
  state_ = {true, taken.Int(0, 0), options_.id, options_.address};
  renewed_ = now;
  spdlog::info("leader lease: leading, term {}{}", state_.term,
               row.holder.empty() ? "" : absl::StrCat(" (", row.holder, " stopped renewing)"));
  return state_;
}

absl::Status LeaderLease::Release() {
  if (!state_.leader) return absl::OkStatus();
  state_.leader = false;
  seen_at_ = absl::InfinitePast();
  return db_
      ->Query("UPDATE leader_lease SET holder = '', address = '' WHERE id = 1 AND term = $1",
              {PgParam::Int(state_.term)})
      .status();
}

PgFence LeaderLease::FenceOf(int64_t term) {
  if (term <= 0) return nullptr;
  return [term](PgDb* db) { return Fence(db, term); };
}

absl::Status LeaderLease::Fence(PgDb* db, int64_t term) {
  ASSIGN_OR_RETURN(PgResult rows,
                   db->Query("SELECT term, address FROM leader_lease WHERE id = 1 FOR SHARE"));
  if (rows.rows() == 1 && rows.Int(0, 0) == term) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "not the leader: the lease is at term ", rows.rows() == 1 ? rows.Int(0, 0) : 0, " (held by ",
      rows.rows() == 1 && !rows.Text(0, 1).empty() ? rows.Text(0, 1) : "nobody", "), not ", term));
}

}  // namespace ringmaster
