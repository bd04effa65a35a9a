// The C++ client of a Ringmaster coordinator: jobs, workers, queues and
// logs. Used by the CLI and tests; ranks reach the rendezvous store with
// domain/rendezvous_client.h.
#ifndef RINGMASTER_CLIENT_CLIENT_H_
#define RINGMASTER_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/coordinator_targets.h"
#include "common/tls.h"
#include "proto/cluster.grpc.pb.h"
#include "proto/job.grpc.pb.h"

namespace ringmaster {

// Thread-safe. Every call is bounded by `rpc_timeout` except the streams
// and Wait, which have their own limits. `address` may list several
// coordinators ("a:7070,b:7070"): calls go to the one that leads, found
// as common/coordinator_targets.h says, for up to 30 s.
// Whether an error is the coordinator's answer to a call (or its absence),
// not the client's own.
bool FromCoordinator(const absl::Status& status);

class Client {
 public:
  // `token` and `tls` (with a client certificate or without) identify the
  // caller; see common/credentials.h.
  explicit Client(const std::string& address, const std::string& token = "", Tls tls = {},
                  absl::Duration rpc_timeout = absl::Seconds(10));

  const std::string& address() const { return address_; }
  // The coordinator calls go to now: after a call, the one that answered
  // (with several, the leader).
  std::string CurrentAddress() { return targets_.Current().address; }

  // `request_id` (optional) makes a retried submit return the first one's
  // job; without one, a random one is sent, which makes this call's own
  // retries safe.
  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec, const std::string& request_id = "");
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  // Every job, newest first, read page by page.
  absl::StatusOr<std::vector<v1::Job>> ListJobs();
  // One page (see ListJobsRequest).
  absl::StatusOr<v1::ListJobsResponse> ListJobsPage(const v1::ListJobsRequest& request);
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id);
  absl::StatusOr<v1::Job> HoldJob(const std::string& job_id);
  absl::StatusOr<v1::Job> ReleaseJob(const std::string& job_id);
  absl::StatusOr<v1::Job> SetJobPriority(const std::string& job_id, const std::string& priority);
  absl::StatusOr<v1::Job> RequeueJob(const std::string& job_id);
  absl::Status DeleteJob(const std::string& job_id);
  absl::StatusOr<std::vector<v1::Worker>> ListWorkers();
  // With the coordinator's topology levels.
  absl::StatusOr<v1::ListWorkersResponse> Workers();
  absl::StatusOr<v1::ListQueuesResponse> ListQueues();
  absl::StatusOr<v1::ConsoleLogin> CreateConsoleLogin();
  // Waits for the workers (up to about 10 s), beyond the usual RPC timeout.
  absl::StatusOr<v1::StacksReport> DumpStacks(const std::string& job_id);
  absl::StatusOr<v1::Worker> CordonWorker(const v1::CordonWorkerRequest& request);
  absl::StatusOr<v1::Worker> UncordonWorker(const std::string& worker_id);
  absl::StatusOr<v1::DrainWorkerResponse> DrainWorker(const v1::DrainWorkerRequest& request);
  // Uploads the code archive at `path` unless the coordinator has it
  // already (then true). Unbounded in time: it takes what the bytes take.
  absl::StatusOr<bool> UploadCode(const std::string& path, const std::string& sha256,
                                  int64_t archive_bytes);

  // Calls `on_event` for each snapshot until the job ends (the stream
  // closes) or `on_event` returns false.
  absl::Status WatchJob(const std::string& job_id,
                        const std::function<bool(const v1::Job&)>& on_event);
  // Calls `on_chunk` with whole lines of rank output; `rank` empty = all.
  absl::Status StreamLogs(const std::string& job_id, std::optional<int> rank, bool follow,
                          const std::function<void(const v1::LogChunk&)>& on_chunk);
  absl::Status StreamLogs(const v1::StreamLogsRequest& request,
                          const std::function<void(const v1::LogChunk&)>& on_chunk);

 private:
  struct Stubs {
    std::string address;
    std::unique_ptr<v1::JobService::Stub> jobs;
    std::unique_ptr<v1::ClusterService::Stub> cluster;
  };
  // How long a call goes on trying the coordinators for one that leads.
  static constexpr absl::Duration kFollowFor = absl::Seconds(30);

  void Prepare(grpc::ClientContext* context, bool bounded) const;
  static Stubs StubsFor(const CoordinatorTargets::Target& target);
  Stubs Current();
  // Makes `rpc` on the coordinator called now, and again as
  // CoordinatorTargets::Follow says (the leader named, the next address).
  // A bounded `idempotent` call tries each of several coordinators for at
  // most 3 s, so that a paused one is passed over.
  absl::Status Call(bool bounded, bool idempotent,
                    const std::function<grpc::Status(Stubs&, grpc::ClientContext*)>& rpc);

  const std::string address_;
  const std::string token_;
  const bool tls_;
  const absl::Duration rpc_timeout_;
  CoordinatorTargets targets_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_CLIENT_H_
