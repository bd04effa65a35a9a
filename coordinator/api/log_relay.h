// Serves StreamLogs by reading rank logs from the workers that hold them
// (WorkerAgentService.ReadLog) and relaying whole lines to the client.
#ifndef RINGMASTER_COORDINATOR_API_LOG_RELAY_H_
#define RINGMASTER_COORDINATOR_API_LOG_RELAY_H_

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/credentials.h"
#include "common/limits.h"
#include "common/mutex.h"
#include "common/task_pool.h"
#include "common/tls.h"
#include "coordinator/core/attempt_placement.h"
#include "proto/job.pb.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

// Thread-safe. The streams poll their ranks' logs in rounds on a pool of
// kThreads threads (a read may wait up to 2 s for a worker); a follow
// stream ends once the job has ended and every log is read.
class LogRelay {
 public:
  static constexpr int kThreads = 4;

  // `signer` makes the agent credential each worker's agent expects;
  // `tls` (the CA only) checks the agents' certificates. Lines longer than
  // `max_line_bytes` are relayed in pieces of that size.
  LogRelay(JobLogIndex* jobs, const CredentialSigner* signer, Tls tls,
           int64_t max_line_bytes = kDefaultMaxLogLineBytes)
      : jobs_(jobs),
        signer_(signer),
        tls_(std::move(tls)),
        max_line_bytes_(std::max<int64_t>(1, max_line_bytes)) {}

  // A reactor that deletes itself when the RPC is done. `user` (the caller)
  // must own the job; a request that names a rank or attempt the job never
  // had is refused with NOT_FOUND, as silence would mislead.
  grpc::ServerWriteReactor<v1::LogChunk>* Stream(const std::string& user,
                                                 const v1::StreamLogsRequest& request);

  JobLogIndex* jobs() const { return jobs_; }
  const CredentialSigner& signer() const { return *signer_; }
  int64_t max_line_bytes() const { return max_line_bytes_; }
  TaskPool* pool() { return &pool_; }
  // The agent of `worker_id` at `address`; with TLS its certificate must
  // name that worker.
  v1::WorkerAgentService::Stub* AgentFor(const std::string& address, const std::string& worker_id);

 private:
  absl::Status Check(const std::string& user, const v1::StreamLogsRequest& request);
  static absl::Status CheckResume(const v1::Job& job, const v1::StreamLogsRequest& request);

  JobLogIndex* const jobs_;
  const CredentialSigner* const signer_;
  const Tls tls_;
  const int64_t max_line_bytes_;
  Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<v1::WorkerAgentService::Stub>>
      agents_ ABSL_GUARDED_BY(mu_);
  TaskPool pool_{kThreads};  // last: its destructor runs the last rounds
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_LOG_RELAY_H_
