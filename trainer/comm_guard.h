// The state machine between a communicator's users and its watchdog, as
// PyTorch's c10d keeps it for NCCL: every call that touches the
// communicator (enqueueing a collective, destroying it) and the watchdog's
// abort are serialized by one mutex, and once aborted the communicator is
// never touched again: every pending and later operation returns the
// reason it was aborted.
//
// An operation is enqueued under the mutex (a short call: NCCL only
// launches), then waited for outside it, so the watchdog can abort a
// collective that a dead peer holds up; aborting makes its kernels return,
// and Complete then reports the watchdog's reason, not the wait's.
#ifndef RINGMASTER_TRAINER_COMM_GUARD_H_
#define RINGMASTER_TRAINER_COMM_GUARD_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace ringmaster {

// What the guard calls on the communicator, always under its mutex.
class GuardedComm {
 public:
  virtual ~GuardedComm() = default;
  // An error the communicator reports by itself (ncclCommGetAsyncError).
  virtual absl::Status AsyncError() = 0;
  // Frees the communicator; its operations in flight return (ncclCommAbort).
  virtual void Abort() = 0;
  // Frees it when nothing failed (ncclCommDestroy).
  virtual void Destroy() = 0;
};

// Thread-safe.
class CommGuard {
 public:
  // `comm` and `clock` must outlive the guard. An operation still in
  // flight after `timeout` aborts the communicator; `rank` names it then.
  CommGuard(GuardedComm* comm, const Clock* clock, absl::Duration timeout, int rank)
      : comm_(comm), clock_(clock), timeout_(timeout), rank_(rank) {}

  // Runs `enqueue` (which may use the communicator) unless it is aborted,
  // and marks an operation in flight. The abort's reason when aborted; an
  // error of `enqueue` fails the communicator for good.
  absl::Status Enqueue(const char* what, absl::FunctionRef<absl::Status()> enqueue);
  // The end of the operation in flight, after its wait returned `waited`:
  // the abort's reason when the watchdog aborted meanwhile, else `waited`
  // (an error is kept: later operations fail with it too).
  absl::Status Complete(absl::Status waited);
  // One watchdog round: aborts on an asynchronous error or an operation in
  // flight longer than the timeout. True when it aborted now.
  bool Check();
  // Destroys the communicator unless it was aborted (then it is gone).
  void Destroy();

  bool aborted() const;
  absl::Status error() const;  // the first error, OK while none

 private:
  void AbortLocked(absl::Status reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  GuardedComm* const comm_;
  const Clock* const clock_;
  const absl::Duration timeout_;
  const int rank_;

  mutable Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool destroyed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool inflight_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time inflight_since_ ABSL_GUARDED_BY(mu_);
  std::string inflight_what_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_COMM_GUARD_H_
