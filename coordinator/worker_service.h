// gRPC edge of WorkerService: one Connect stream per worker, registered
// with WorkerMembership as that worker's WorkerLink; its messages go to the
// JobManager with the stream's session.
#ifndef RINGMASTER_COORDINATOR_WORKER_SERVICE_H_
#define RINGMASTER_COORDINATOR_WORKER_SERVICE_H_

#include "coordinator/access_policy.h"
#include "coordinator/job_manager.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(JobManager* manager, WorkerMembership* membership, const AccessPolicy* access)
      : manager_(manager), membership_(membership), access_(access) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  JobManager* const manager_;
  WorkerMembership* const membership_;
  const AccessPolicy* const access_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_WORKER_SERVICE_H_
