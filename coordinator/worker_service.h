// gRPC edge of WorkerService: one Connect stream per worker, handed to the
// JobManager as that worker's WorkerLink.
#ifndef RINGMASTER_COORDINATOR_WORKER_SERVICE_H_
#define RINGMASTER_COORDINATOR_WORKER_SERVICE_H_

#include "common/auth.h"
#include "coordinator/job_manager.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(JobManager* manager, const TokenCheck* auth)
      : manager_(manager), auth_(auth) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  JobManager* const manager_;
  const TokenCheck* const auth_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_WORKER_SERVICE_H_
