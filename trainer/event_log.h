// A thread-safe record of timed events, for tests that check ordering
// (for example that a bucket's all-reduce starts before backward ends).
#ifndef RINGMASTER_TRAINER_EVENT_LOG_H_
#define RINGMASTER_TRAINER_EVENT_LOG_H_

#include <chrono>
#include <string>
#include <vector>

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
    events_.push_back({std::move(name), std::chrono::steady_clock::now()});
  }
  std::vector<Event> events() const {
    MutexLock lock(&mu_);
    return events_;
  }
  // Index of the first event named `name`, or -1.
  int IndexOf(const std::string& name) const {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < events_.size(); ++i) {
      if (events_[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  mutable Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_EVENT_LOG_H_
