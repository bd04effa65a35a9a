// The locks of all of our code: Mutex, and a Notification built on it,
// made visible to ThreadSanitizer.
//
// ThreadSanitizer learns that one thread's writes happen before another's
// reads from the synchronization it sees; Mutex synchronizes with
// atomics and futexes inside Debian's Abseil, which is not instrumented, so
// a TSan build would see no lock at all and report every field handed from
// one thread to the next under one. Each lock and unlock here also tells TSan
// (acquire after locking, release before unlocking, both around a wait). In
// every other build the annotations compile to nothing and this is
// Mutex as it is.
#ifndef RINGMASTER_COMMON_MUTEX_H_
#define RINGMASTER_COMMON_MUTEX_H_

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace ringmaster {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    Acquired();
  }

  void Unlock() ABSL_UNLOCK_FUNCTION() {
    Releasing();
    mu_.Unlock();
  }

  // Releases the lock until `cond` holds, then holds it again (Mutex's
  // Await). `cond` is evaluated with the lock held, maybe on another thread.
  void Await(const absl::Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Releasing();
    Evaluation evaluation(this, cond);
    mu_.Await(evaluation.condition());
    Acquired();
  }

  // As Await, giving up after `timeout`; returns whether `cond` holds. The
  // lock is held again either way.
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Releasing();
    Evaluation evaluation(this, cond);
    bool holds = mu_.AwaitWithTimeout(evaluation.condition(), timeout);
    Acquired();
    return holds;
  }

  bool AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Releasing();
    Evaluation evaluation(this, cond);
    bool holds = mu_.AwaitWithDeadline(evaluation.condition(), deadline);
    Acquired();
    return holds;
  }

 private:
  // A waiter's condition as absl::Mutex evaluates it: with the lock held, on
  // the waiting thread or on the one unlocking. Under TSan that evaluation is
  // told it holds the lock, so that what it reads was written before and
  // what comes after it sees it; elsewhere it is the condition itself.
  class Evaluation {
   public:
    Evaluation(Mutex* mu, const absl::Condition& cond) : mu_(mu), cond_(cond) {}
#ifdef ABSL_HAVE_THREAD_SANITIZER
    absl::Condition condition() { return absl::Condition(&Evaluation::Eval, this); }
#else
    const absl::Condition& condition() { return cond_; }
#endif

   private:
    static bool Eval(Evaluation* evaluation) {
      evaluation->mu_->Acquired();
      bool holds = evaluation->cond_.Eval();
      evaluation->mu_->Releasing();
      return holds;
    }

    Mutex* const mu_;
    const absl::Condition& cond_;
  };

#ifdef ABSL_HAVE_THREAD_SANITIZER
  void Acquired() { __tsan_acquire(this); }
  void Releasing() { __tsan_release(this); }
#else
  void Acquired() {}
  void Releasing() {}
#endif

  absl::Mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A one-shot event (Notification's interface): what a thread wrote
// before Notify is visible to a thread that returns from a wait.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }

  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }

  void WaitForNotification() const {
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&notified_));
  }

  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&notified_), timeout);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_MUTEX_H_
