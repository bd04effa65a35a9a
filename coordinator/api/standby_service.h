// What a standby coordinator serves while another one leads: job reads
// (GetJob, ListJobs) from the shared store, logs relayed from the workers
// that hold them (StandbyLogService), and for every other call UNAVAILABLE
// naming the leader, so that clients, workers and ranks go there.
// Registered as the server's generic service, StandbyService answers every
// method of the API without a handler of its own for each.
#ifndef RINGMASTER_COORDINATOR_API_STANDBY_SERVICE_H_
#define RINGMASTER_COORDINATOR_API_STANDBY_SERVICE_H_

#include <functional>
#include <string>

#include <grpcpp/generic/async_generic_service.h>

#include "absl/status/status.h"
#include "common/coordinator_targets.h"
#include "coordinator/api/access_policy.h"
#include "coordinator/api/log_relay.h"
#include "coordinator/core/attempt_placement.h"
#include "coordinator/core/job_store.h"
#include "proto/job.grpc.pb.h"

namespace ringmaster {

// UNAVAILABLE "not the leader: the leader is at ADDRESS" (or that none
// leads now), which clients follow (common/coordinator_targets.h).
absl::Status NotLeaderError(const std::string& leader_address);

// Thread-safe.
class StandbyService final : public grpc::CallbackGenericService {
 public:
  // `leader` gives the leader's address as last seen (empty: none).
  StandbyService(JobStore* store, const AccessPolicy* access, std::function<std::string()> leader)
      : store_(store), access_(access), leader_(std::move(leader)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

  // Whether the standby answers `method` ("/ringmaster.v1.JobService/GetJob").
  static bool Reads(const std::string& method);
  // The answer to a call of a method it Reads.
  absl::Status Answer(const grpc::GenericCallbackServerContext& context,
                      const grpc::ByteBuffer& request, grpc::ByteBuffer* response) const;
  absl::Status NotLeader() const { return NotLeaderError(leader_()); }

 private:
  JobStore* const store_;
  const AccessPolicy* const access_;
  const std::function<std::string()> leader_;
};

// Refuses every call with `refusal()`: a coordinator that cannot serve
// yet. Thread-safe.
class RefusingService final : public grpc::CallbackGenericService {
 public:
  explicit RefusingService(std::function<absl::Status()> refusal) : refusal_(std::move(refusal)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  const std::function<absl::Status()> refusal_;
};

// Jobs as the store has them, and their ranks' workers as placed.
class StoredJobLogIndex final : public JobLogIndex {
 public:
  explicit StoredJobLogIndex(JobStore* store) : store_(store) {}
  absl::StatusOr<v1::Job> Get(const std::string& job_id) override { return store_->Load(job_id); }
  absl::StatusOr<std::vector<RankLogSource>> LogSources(const v1::Job& job, int attempt) override {
    return AttemptRanks(job, attempt);
  }

 private:
  JobStore* const store_;
};

// JobService's StreamLogs on a standby; its other methods are left to the
// generic StandbyService.
using StandbyLogServiceBase =
    v1::JobService::WithGenericMethod_SubmitJob<v1::JobService::WithGenericMethod_GetJob<
        v1::JobService::WithGenericMethod_ListJobs<v1::JobService::WithGenericMethod_CancelJob<
            v1::JobService::WithGenericMethod_HoldJob<v1::JobService::WithGenericMethod_ReleaseJob<
                v1::JobService::WithGenericMethod_SetJobPriority<
                    v1::JobService::WithGenericMethod_RequeueJob<
                        v1::JobService::WithGenericMethod_DeleteJob<
                            v1::JobService::WithGenericMethod_WatchJob<
                                v1::JobService::WithGenericMethod_WatchJobs<
                                    v1::JobService::WithGenericMethod_DumpStacks<
                                        v1::JobService::WithGenericMethod_StatCode<
                                            v1::JobService::WithGenericMethod_UploadCode<
                                                v1::JobService::WithCallbackMethod_StreamLogs<
                                                    v1::JobService::Service>>>>>>>>>>>>>>>;

class StandbyLogService final : public StandbyLogServiceBase {
 public:
  StandbyLogService(LogRelay* logs, const AccessPolicy* access) : logs_(logs), access_(access) {}
  grpc::ServerWriteReactor<v1::LogChunk>* StreamLogs(grpc::CallbackServerContext* context,
                                                     const v1::StreamLogsRequest* request) override;

 private:
  LogRelay* const logs_;
  const AccessPolicy* const access_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_STANDBY_SERVICE_H_
