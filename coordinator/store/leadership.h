// Runs the leader election (LeaderLease) of one coordinator on a thread of
// its own, on a connection of its own: a step every second (or a fifth of
// the lease timeout, when shorter), and a new connection when the old one
// is lost. Tells when this coordinator starts to lead and when it stops:
// when it is deposed, or when its lease has gone unrenewed for the timeout
// by its own clock, even while a step hangs on the network.
#ifndef RINGMASTER_COORDINATOR_STORE_LEADERSHIP_H_
#define RINGMASTER_COORDINATOR_STORE_LEADERSHIP_H_

#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "coordinator/store/leader_lease.h"
#include "coordinator/store/pg_db.h"

namespace ringmaster {

struct LeadershipOptions {
  std::string conninfo;
  std::string password;  // empty: libpq's own
  LeaseOptions lease;
};

// Thread-safe.
class Leadership {
 public:
  // Connects, creates the lease's table when missing, and starts electing.
  static absl::StatusOr<std::unique_ptr<Leadership>> Start(LeadershipOptions options);
  // Stops electing; a leader releases its lease, so that a standby takes
  // over at once.
  ~Leadership();

  LeaseState state() const;
  // Waits until this coordinator leads (true) or `stop` is notified.
  bool WaitToLead(Notification* stop) const;
  // Waits while this coordinator leads: true once it no longer does,
  // false when `stop` is notified first.
  bool WaitWhileLeading(Notification* stop) const;

 private:
  Leadership(LeadershipOptions options, std::unique_ptr<PgDb> db);
  void Run();
  // One step of the lease, on a new connection when the old one is lost.
  void Step() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_);

  const LeadershipOptions options_;
  const absl::Duration interval_;
  Mutex step_mu_;  // the election's thread's; the destructor's after it
  std::unique_ptr<PgDb> db_ ABSL_GUARDED_BY(step_mu_);
  LeaderLease lease_ ABSL_GUARDED_BY(step_mu_);
  std::string said_ ABSL_GUARDED_BY(step_mu_) = "OK";  // the last trouble logged
  mutable Mutex mu_;
  LeaseState state_ ABSL_GUARDED_BY(mu_);
  absl::Time renewed_ ABSL_GUARDED_BY(mu_);  // when the last good renewal was sent
  Notification stop_;
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_LEADERSHIP_H_
