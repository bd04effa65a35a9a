#include "common/task_pool.h"

namespace ringmaster {

TaskPool::TaskPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

TaskPool::~TaskPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void TaskPool::PostAfter(absl::Duration delay, std::function<void()> work) {
  MutexLock lock(&mu_);
  queue_.emplace(std::make_pair(absl::Now() + delay, posted_++), std::move(work));
}

std::function<void()> TaskPool::Next() {
  MutexLock lock(&mu_);
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return nullptr;
      mu_.Await(absl::Condition(this, &TaskPool::HasWorkOrStopping));
      continue;
    }
    const absl::Time due = queue_.begin()->first.first;
    if (stopping_ || due <= absl::Now()) break;
    // Until it is due, unless an item is posted (it may be earlier) or
    // the pool stops.
    struct Wake {
      TaskPool* pool;
      int64_t posted;
    } wake{this, posted_};
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                return w->pool->stopping_ || w->pool->posted_ != w->posted;
                              },
                              &wake),
                          due);
  }
  std::function<void()> work = std::move(queue_.begin()->second);
  queue_.erase(queue_.begin());
  return work;
}

void TaskPool::Run() {
  while (std::function<void()> work = Next()) work();
}

}  // namespace ringmaster
