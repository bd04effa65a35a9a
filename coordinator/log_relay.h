// Serves StreamLogs by reading rank logs from the workers that hold them
// (WorkerAgentService.ReadLog) and relaying whole lines to the client.
#ifndef RINGMASTER_COORDINATOR_LOG_RELAY_H_
#define RINGMASTER_COORDINATOR_LOG_RELAY_H_

#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "coordinator/job_manager.h"
#include "proto/job.pb.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

// Thread-safe. Each stream runs one relay thread that polls its ranks'
// logs; a follow stream ends once the job has ended and every log is read.
class LogRelay {
 public:
  // `token`: sent to the workers' agents, which require the cluster's.
  LogRelay(JobManager* manager, std::string token)
      : manager_(manager), token_(std::move(token)) {}

  // A reactor that deletes itself when the RPC is done.
  grpc::ServerWriteReactor<v1::LogChunk>* Stream(const v1::StreamLogsRequest& request);

  JobManager* manager() const { return manager_; }
  const std::string& token() const { return token_; }
  v1::WorkerAgentService::Stub* AgentFor(const std::string& address);

 private:
  JobManager* const manager_;
  const std::string token_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::WorkerAgentService::Stub>> agents_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_LOG_RELAY_H_
