// Runs posted work on a fixed number of threads of its own, each item at
// or after its time, items due at the same time in the order posted: for
// work that may block (a mutex, a disk sync, an RPC) and must not do so on
// a gRPC thread. With one thread, items run one at a time, in order.
#ifndef RINGMASTER_COMMON_TASK_POOL_H_
#define RINGMASTER_COMMON_TASK_POOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace ringmaster {

// Thread-safe. The queue is bounded by its callers (see each use). The
// destructor runs everything still queued at once, then joins.
class TaskPool {
 public:
  explicit TaskPool(int threads);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  void Post(std::function<void()> work) { PostAfter(absl::ZeroDuration(), std::move(work)); }
  void PostAfter(absl::Duration delay, std::function<void()> work);

 private:
  void Run();
  // The next item to run, once due; empty when stopping with none left.
  std::function<void()> Next();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  }

  Mutex mu_;
  // By due time, then by the order posted.
  std::map<std::pair<absl::Time, int64_t>, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t posted_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_TASK_POOL_H_
