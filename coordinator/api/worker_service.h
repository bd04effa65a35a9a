// gRPC edge of WorkerService: one Connect stream per worker, registered
// with WorkerMembership as that worker's WorkerLink; its messages go to the
// JobManager with the stream's session.
#ifndef RINGMASTER_COORDINATOR_API_WORKER_SERVICE_H_
#define RINGMASTER_COORDINATOR_API_WORKER_SERVICE_H_

#include "common/limits.h"
#include "common/task_pool.h"
#include "coordinator/api/access_policy.h"
#include "coordinator/code/code_store.h"
#include "coordinator/jobs/job_manager.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // A worker stream with more than `max_queued` messages waiting to be
  // written is ended (RESOURCE_EXHAUSTED).
  WorkerServiceImpl(JobManager* manager, WorkerMembership* membership, CodeStore* code,
                    const AccessPolicy* access, int max_queued = kDefaultMaxStreamQueue)
      : manager_(manager),
        membership_(membership),
        code_(code),
        access_(access),
        max_queued_(max_queued) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;
  // For any worker: code archives are not secret among the cluster's hosts.
  grpc::ServerUnaryReactor* ReadCode(grpc::CallbackServerContext* context,
                                     const v1::ReadCodeRequest* request,
                                     v1::ReadCodeResponse* response) override;

 private:
  JobManager* const manager_;
  WorkerMembership* const membership_;
  CodeStore* const code_;
  const AccessPolicy* const access_;
  const int max_queued_;
  // Handles every worker's messages, one at a time, off gRPC's threads.
  // Each stream has at most one message in it.
  TaskPool inbox_{1};
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_WORKER_SERVICE_H_
