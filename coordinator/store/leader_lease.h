// Leader election among coordinators that share one PostgreSQL, with
// fencing. One row holds the lease: its term, its holder (id and address),
// and a renewal count.
//
//   - The leader renews every second or so, by a compare-and-set on its
//     term. A leader that has not renewed for `timeout` by its own clock
//     (from when it sent its last successful renewal) steps down, reachable
//     database or not.
//   - A standby watches the row. Once the row has not changed for `timeout`
//     by the standby's own clock, it takes over by a compare-and-set of
//     what it last saw, term + 1. No two coordinators' clocks are compared,
//     as in Kubernetes' leader election.
//   - Fence, inside each of the leader's write transactions, checks the
//     term and holds the row against a takeover until the transaction ends.
//     A deposed leader therefore commits nothing after the next leader's
//     first write, whatever its clock or pauses.
#ifndef RINGMASTER_COORDINATOR_STORE_LEADER_LEASE_H_
#define RINGMASTER_COORDINATOR_STORE_LEADER_LEASE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/ha/lease.h"
#include "coordinator/store/pg_db.h"
#include "coordinator/store/pg_fence.h"

namespace ringmaster {

// Thread-compatible: one owner steps it. `db` is its own connection.
class LeaderLease {
 public:
  LeaderLease(PgDb* db, const Clock* clock, LeaseOptions options)
      : db_(db), clock_(clock), options_(std::move(options)) {}

  // The lease's table and row, when missing.
  static absl::Status CreateTable(PgDb* db);

  // One round of the election: renews when leading, else watches the row
  // and takes over once it has gone unchanged for the timeout. The state
  // after it; an error when the database could not be asked (the state
  // then stays as it was, but for a leader whose lease ran out).
  absl::StatusOr<LeaseState> Step();
  const LeaseState& state() const { return state_; }

  // Gives up leadership at once (a clean shutdown), so that a standby
  // takes over at its next step.
  absl::Status Release();

  // Inside a transaction on `db`: FAILED_PRECONDITION "not the leader"
  // unless the lease still has `term`, and the row is then held until the
  // transaction ends.
  static absl::Status Fence(PgDb* db, int64_t term);
  // The store's fence for the leader of `term` (0: none).
  static PgFence FenceOf(int64_t term);

 private:
  struct Row {
    int64_t term = 0;
    int64_t renewals = 0;
    std::string holder;
    std::string address;
  };
  absl::StatusOr<Row> Read();
  absl::StatusOr<LeaseState> Renew(absl::Time now);
  absl::StatusOr<LeaseState> Watch(absl::Time now);
  void Follow(const Row& row, absl::Time now);

  PgDb* const db_;
  const Clock* const clock_;
  const LeaseOptions options_;
  LeaseState state_;
  absl::Time renewed_;  // when the leader sent its last successful renewal
  Row seen_;            // the row as a standby last saw it change
  absl::Time seen_at_ = absl::InfinitePast();
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_LEADER_LEASE_H_
