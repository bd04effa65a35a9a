// A WorkerLink that records what the coordinator sent.
#ifndef RINGMASTER_COORDINATOR_CORE_FAKE_WORKER_LINK_H_
#define RINGMASTER_COORDINATOR_CORE_FAKE_WORKER_LINK_H_

#include <vector>

#include "common/mutex.h"
#include "coordinator/core/worker_link.h"

namespace ringmaster {

class FakeWorkerLink final : public WorkerLink {
 public:
  void Send(const v1::CoordinatorMessage& message) override {
    MutexLock lock(&mu_);
    sent_.push_back(message);
  }
  // Returns and forgets what was sent so far.
  std::vector<v1::CoordinatorMessage> Take() {
    MutexLock lock(&mu_);
    return std::move(sent_);
  }

 private:
  Mutex mu_;
  std::vector<v1::CoordinatorMessage> sent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_FAKE_WORKER_LINK_H_
