// gRPC edge of WorkerAgentService: serves rank logs to the coordinator,
// takes the ranks' progress reports, and keeps and serves the replicas of
// peers' snapshots; AgentAccess says who may call.
#ifndef RINGMASTER_WORKER_AGENT_SERVICE_H_
#define RINGMASTER_WORKER_AGENT_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/worker.grpc.pb.h"
#include "worker/agent_access.h"
#include "worker/progress_board.h"
#include "worker/rank_supervisor.h"
#include "worker/snapshot_store.h"

namespace ringmaster {

// The whole lines in up to `request.max_bytes` of the rank log (rank_log.h)
// at `path`, from `request.offset` or its tail, as the request asks them.
// NOT_FOUND when the file does not exist. Errors name the log as `what`
// ("job J attempt A rank R"), never by its path.
absl::StatusOr<v1::ReadLogResponse> ReadLogFile(const std::string& path, const std::string& what,
                                                const v1::ReadLogRequest& request);

class AgentServiceImpl final : public v1::WorkerAgentService::CallbackService {
 public:
  // `on_progress` also sees every report (the worker's metrics).
  AgentServiceImpl(const RankSupervisor* supervisor, ProgressBoard* progress,
                   std::function<void(const v1::RankProgress&)> on_progress,
                   const AgentAccess* access, SnapshotStore* snapshots)
      : supervisor_(supervisor),
        progress_(progress),
        on_progress_(std::move(on_progress)),
        access_(access),
        snapshots_(snapshots) {}
  grpc::ServerUnaryReactor* ReadLog(grpc::CallbackServerContext* context,
                                    const v1::ReadLogRequest* request,
                                    v1::ReadLogResponse* response) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const v1::RankProgress* request,
                                           v1::ReportProgressResponse* response) override;
  grpc::ServerUnaryReactor* PushReplica(grpc::CallbackServerContext* context,
                                        const v1::PushReplicaRequest* request,
                                        v1::PushReplicaResponse* response) override;
  grpc::ServerUnaryReactor* FetchSnapshot(grpc::CallbackServerContext* context,
                                          const v1::FetchSnapshotRequest* request,
                                          v1::FetchSnapshotResponse* response) override;

 private:
  const RankSupervisor* const supervisor_;
  ProgressBoard* const progress_;
  const std::function<void(const v1::RankProgress&)> on_progress_;
  const AgentAccess* const access_;
  SnapshotStore* const snapshots_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_AGENT_SERVICE_H_
