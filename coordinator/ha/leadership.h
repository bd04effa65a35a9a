// Runs one coordinator's part in the leader election (a Lease) on a thread
// of its own: a step every second (or a fifth of the lease timeout, when
// shorter). Tells when this coordinator starts to lead and when it stops:
// when it is deposed, or when its lease has gone unrenewed for the timeout
// by its own clock, even while a step hangs on the network.
#ifndef RINGMASTER_COORDINATOR_HA_LEADERSHIP_H_
#define RINGMASTER_COORDINATOR_HA_LEADERSHIP_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "common/mutex.h"
#include "coordinator/ha/lease.h"

namespace ringmaster {

// Thread-safe.
class Leadership {
 public:
  // Starts electing with `lease`, whose timeout is `timeout`.
  static std::unique_ptr<Leadership> Start(std::unique_ptr<Lease> lease, absl::Duration timeout);
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
  Leadership(std::unique_ptr<Lease> lease, absl::Duration timeout);
  void Run();
  void Step() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_);

  const absl::Duration timeout_;
  const absl::Duration interval_;
  Mutex step_mu_;  // the election's thread's; the destructor's after it
  std::unique_ptr<Lease> lease_ ABSL_GUARDED_BY(step_mu_);
  std::string said_ ABSL_GUARDED_BY(step_mu_) = "OK";  // the last trouble logged
  mutable Mutex mu_;
  LeaseState state_ ABSL_GUARDED_BY(mu_);
  absl::Time renewed_ ABSL_GUARDED_BY(mu_);  // when the last good renewal was sent
  Notification stop_;
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_HA_LEADERSHIP_H_
