// Runs posted work one item at a time, in order, on a thread of its own:
// for work that may block (a mutex, a disk sync) and must not do so on a
// gRPC thread.
#ifndef RINGMASTER_COMMON_SERIAL_EXECUTOR_H_
#define RINGMASTER_COMMON_SERIAL_EXECUTOR_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringmaster {

// Thread-safe. The queue is bounded by its callers (see each use); the
// destructor runs what is queued, then joins.
class SerialExecutor {
 public:
  SerialExecutor() : thread_([this] { Run(); }) {}
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  void Post(std::function<void()> work);

 private:
  void Run();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SERIAL_EXECUTOR_H_
