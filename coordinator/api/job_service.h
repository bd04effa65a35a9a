// gRPC edge of JobService and ClusterService: translate, call the
// JobManager, map the status. No logic of their own.
#ifndef RINGMASTER_COORDINATOR_API_JOB_SERVICE_H_
#define RINGMASTER_COORDINATOR_API_JOB_SERVICE_H_

#include <atomic>

#include "coordinator/api/access_policy.h"
#include "coordinator/api/code_upload.h"
#include "coordinator/api/log_relay.h"
#include "coordinator/code/code_store.h"
#include "coordinator/jobs/job_manager.h"
#include "proto/cluster.grpc.pb.h"
#include "proto/job.grpc.pb.h"

namespace ringmaster {

// A ListJobsRequest as the JobManager's query; INVALID_ARGUMENT naming the
// field that is wrong.
absl::StatusOr<JobQuery> ToJobQuery(const v1::ListJobsRequest& request);

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  JobServiceImpl(JobManager* manager, LogRelay* logs, CodeStore* code, CodeUploads* uploads,
                 const AccessPolicy* access)
      : manager_(manager), logs_(logs), code_(code), uploads_(uploads), access_(access) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* GetJobProgress(grpc::CallbackServerContext* context,
                                           const v1::GetJobProgressRequest* request,
                                           v1::JobProgress* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* HoldJob(grpc::CallbackServerContext* context,
                                    const v1::HoldJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* ReleaseJob(grpc::CallbackServerContext* context,
                                       const v1::ReleaseJobRequest* request,
                                       v1::Job* response) override;
  grpc::ServerUnaryReactor* SetJobPriority(grpc::CallbackServerContext* context,
                                           const v1::SetJobPriorityRequest* request,
                                           v1::Job* response) override;
  grpc::ServerUnaryReactor* RequeueJob(grpc::CallbackServerContext* context,
                                       const v1::RequeueJobRequest* request,
                                       v1::Job* response) override;
  grpc::ServerUnaryReactor* DeleteJob(grpc::CallbackServerContext* context,
                                      const v1::DeleteJobRequest* request,
                                      v1::DeleteJobResponse* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerWriteReactor<v1::JobsEvent>* WatchJobs(grpc::CallbackServerContext* context,
                                                     const v1::WatchJobsRequest* request) override;
  grpc::ServerWriteReactor<v1::LogChunk>* StreamLogs(grpc::CallbackServerContext* context,
                                                     const v1::StreamLogsRequest* request) override;
  grpc::ServerUnaryReactor* DumpStacks(grpc::CallbackServerContext* context,
                                       const v1::DumpStacksRequest* request,
                                       v1::StacksReport* response) override;
  grpc::ServerUnaryReactor* StatCode(grpc::CallbackServerContext* context,
                                     const v1::StatCodeRequest* request,
                                     v1::StatCodeResponse* response) override;
  grpc::ServerReadReactor<v1::UploadCodeRequest>* UploadCode(
      grpc::CallbackServerContext* context, v1::UploadCodeResponse* response) override;

 private:
  // OK when the caller may `act` ("cancel") the job: the admin, or a user
  // who owns it.
  absl::Status OwnerMay(const grpc::ServerContextBase& context, const std::string& job_id,
                        absl::string_view act);
  // Who calls, when it may `act` the job.
  absl::StatusOr<std::string> OwnerActing(const grpc::ServerContextBase& context,
                                          const std::string& job_id, absl::string_view act);
  // Answers with the job `change` (given who calls) returns, when the
  // caller may `act` it.
  grpc::ServerUnaryReactor* ChangeJob(
      grpc::CallbackServerContext* context, const std::string& job_id, absl::string_view act,
      const std::function<absl::StatusOr<v1::Job>(const std::string& by)>& change,
      v1::Job* response);

  JobManager* const manager_;
  LogRelay* const logs_;
  CodeStore* const code_;
  CodeUploads* const uploads_;
  const AccessPolicy* const access_;
};

class ClusterServiceImpl final : public v1::ClusterService::CallbackService {
 public:
  ClusterServiceImpl(JobManager* manager, const AccessPolicy* access)
      : manager_(manager), access_(access) {}
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerUnaryReactor* ListQueues(grpc::CallbackServerContext* context,
                                       const v1::ListQueuesRequest* request,
                                       v1::ListQueuesResponse* response) override;
  grpc::ServerUnaryReactor* CordonWorker(grpc::CallbackServerContext* context,
                                         const v1::CordonWorkerRequest* request,
                                         v1::Worker* response) override;
  grpc::ServerUnaryReactor* UncordonWorker(grpc::CallbackServerContext* context,
                                           const v1::UncordonWorkerRequest* request,
                                           v1::Worker* response) override;
  grpc::ServerUnaryReactor* DrainWorker(grpc::CallbackServerContext* context,
                                        const v1::DrainWorkerRequest* request,
                                        v1::DrainWorkerResponse* response) override;
  grpc::ServerUnaryReactor* CreateConsoleLogin(grpc::CallbackServerContext* context,
                                               const v1::CreateConsoleLoginRequest* request,
                                               v1::ConsoleLogin* response) override;
  // The HTTP API's port, said with each console sign-in code.
  void set_http_port(int port) { http_port_.store(port); }

 private:
  JobManager* const manager_;
  const AccessPolicy* const access_;
  std::atomic<int> http_port_{0};
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_JOB_SERVICE_H_
