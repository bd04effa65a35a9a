// A thread-safe record of timed events, for tests that check ordering
// (for example that a bucket's all-reduce starts before backward ends).
#ifndef RINGMASTER_TRAINER_EVENT_LOG_H_
#define RINGMASTER_TRAINER_EVENT_LOG_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/mutex.h"

namespace ringmaster {

class EventLog {
 public:
  struct Event {
    std::string name;
    std::chrono::steady_clock::time_point time;
  };
  void Record(std::string name) {
    MutexLock lock(&mu_);
    if (name == hold_at_) {
      // What another thread has already been given to do shows first,
      // however the threads are scheduled.
      auto seen = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return Find(hold_until_) >= 0; };
      mu_.AwaitWithTimeout(absl::Condition(&seen), hold_for_);
    }
    events_.push_back({std::move(name), std::chrono::steady_clock::now()});
  }
  // Record(`at`) first waits, up to `limit`, for `until` to be recorded.
  void HoldAt(std::string at, std::string until, absl::Duration limit) {
    MutexLock lock(&mu_);
    hold_at_ = std::move(at);
    hold_until_ = std::move(until);
    hold_for_ = limit;
  }
  std::vector<Event> events() const {
    MutexLock lock(&mu_);
    return events_;
  }
  // Index of the first event named `name`, or -1.
  int IndexOf(const std::string& name) const {
    MutexLock lock(&mu_);
    return Find(name);
  }

 private:
  int Find(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < events_.size(); ++i) {
      if (events_[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }

  mutable Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::string hold_at_ ABSL_GUARDED_BY(mu_);
  std::string hold_until_ ABSL_GUARDED_BY(mu_);
  absl::Duration hold_for_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_EVENT_LOG_H_
