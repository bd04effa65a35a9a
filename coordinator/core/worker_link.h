// The coordinator's end of one worker's Connect stream.
#ifndef RINGMASTER_COORDINATOR_CORE_WORKER_LINK_H_
#define RINGMASTER_COORDINATOR_CORE_WORKER_LINK_H_

#include "proto/worker.pb.h"

namespace ringmaster {

// Implementations are thread-safe and Send never blocks: messages are
// queued and written in order. Messages sent after the stream closed are
// dropped; the worker learns the truth when it registers again.
class WorkerLink {
 public:
  virtual ~WorkerLink() = default;
  virtual void Send(const v1::CoordinatorMessage& message) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_WORKER_LINK_H_
