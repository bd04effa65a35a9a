#include "trainer/comm_guard.h"

#include "absl/strings/str_cat.h"

namespace ringmaster {

absl::Status CommGuard::Enqueue(const char* what, absl::FunctionRef<absl::Status()> enqueue) {
  MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (destroyed_) return absl::FailedPreconditionError("the communicator is destroyed");
  absl::Status status = enqueue();
  if (!status.ok()) {
    error_ = status;
    return status;
  }
  inflight_ = true;
  inflight_since_ = clock_->Now();
  inflight_what_ = what;
  return absl::OkStatus();
}

absl::Status CommGuard::Complete(absl::Status waited) {
  MutexLock lock(&mu_);
  inflight_ = false;
  if (aborted_) return error_;  // the watchdog's reason is the real one
  if (!waited.ok() && error_.ok()) error_ = waited;
  return waited;
}

bool CommGuard::Check() {
  MutexLock lock(&mu_);
  if (aborted_ || destroyed_) return false;
  absl::Status status = comm_->AsyncError();
  if (!status.ok()) {
    status = absl::Status(status.code(),
                          absl::StrCat("asynchronous communicator error: ", status.message()));
  } else if (inflight_ && clock_->Now() - inflight_since_ > timeout_) {
    status = absl::DeadlineExceededError(absl::StrCat(inflight_what_, " on rank ", rank_,
                                                      " exceeded ", absl::FormatDuration(timeout_),
                                                      "; a peer is gone or stuck"));
  }
  if (status.ok()) return false;
  AbortLocked(std::move(status));
  return true;
}

void CommGuard::AbortLocked(absl::Status reason) {
  if (error_.ok()) error_ = std::move(reason);
  comm_->Abort();
  aborted_ = true;
}

void CommGuard::Destroy() {
  MutexLock lock(&mu_);
  if (aborted_ || destroyed_) return;
  destroyed_ = true;
  // After a failed operation the communicator may be in any state: abort
  // it rather than wait in a destroy for peers that are gone.
  if (error_.ok()) {
    comm_->Destroy();
  } else {
    comm_->Abort();
    aborted_ = true;
  }
}

bool CommGuard::aborted() const {
  MutexLock lock(&mu_);
  return aborted_;
}

absl::Status CommGuard::error() const {
  MutexLock lock(&mu_);
  return error_;
}

}  // namespace ringmaster
