// Wires the coordinator: job store, rendezvous store, JobManager and the
// gRPC services, plus the timer that drives health checks and deadlines.
#ifndef RINGMASTER_COORDINATOR_API_COORDINATOR_SERVER_H_
#define RINGMASTER_COORDINATOR_API_COORDINATOR_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "common/metrics_server.h"
#include "common/mutex.h"
#include "common/server_reflection_v1.h"
#include "common/tls.h"
#include "coordinator/api/access_policy.h"
#include "coordinator/api/coordinator_metrics.h"
#include "coordinator/api/http_gateway.h"
#include "coordinator/api/job_service.h"
#include "coordinator/api/log_relay.h"
#include "coordinator/api/rendezvous_service.h"
#include "coordinator/api/standby_service.h"
#include "coordinator/api/worker_service.h"
#include "coordinator/code/code_store.h"
#include "coordinator/ha/leadership.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/store/store_engine.h"
#include "domain/queue_config.h"
#include "domain/store_config.h"

namespace ringmaster {

struct CoordinatorConfig {
  std::string listen_address = "0.0.0.0:7070";
  std::string metrics_address = "0.0.0.0:7071";          // empty: no /metrics
  std::string http_address;                              // the HTTP/JSON API; empty: none
  absl::Duration metrics_retention = absl::Minutes(10);  // of an ended job's series
  std::string state_dir;    // holds the credential key and code archives (and SQLite's file)
  StoreConfig store;        // where jobs are kept; SQLite's path empty: <state_dir>/coordinator.db
  int64_t lease_term = 0;   // with PostgreSQL: the leader's term, which fences its writes
  std::string admin_token;  // the admin credential; empty: none
  Tls tls;                  // coordinator.crt/.key and ca.crt; nullopt: plaintext
  RendezvousLimits rendezvous;
  int64_t max_log_line_bytes = kDefaultMaxLogLineBytes;    // longer lines are relayed split
  int max_stream_queue = kDefaultMaxStreamQueue;           // messages waiting on one worker stream
  int64_t max_upload_bytes = kDefaultMaxUploadBytes;       // largest code archive stored
  absl::Duration upload_idle_timeout = absl::Seconds(30);  // an upload receiving nothing ends
  MembershipOptions membership;
  JobManagerOptions manager;
};

// The key that signs credentials: <state_dir>/credential.key, made on
// first use; with a shared store, the store's (seeded with that one), which
// every coordinator uses.
absl::StatusOr<std::string> LoadCredentialKey(const std::string& state_dir, StoreEngine& store);
// A new key in place of the current one: in the shared store when there is
// one (every coordinator's), and in the state directory, owned as the
// directory is. Everything the old key signed is void; running
// coordinators take the new key on their own (KeyWatch).
absl::Status RotateCredentialKey(const std::string& state_dir, StoreEngine& store);

class CoordinatorServer {
 public:
  // Opens the store, recovers jobs and starts serving.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(const CoordinatorConfig& config);
  ~CoordinatorServer();

  int port() const { return port_; }
  // Blocks until Shutdown is called from another thread (or a signal handler
  // thread).
  void Wait();
  void Shutdown();
  // The queues file read again (SIGHUP, or its bytes changed): queues that
  // were refused keep the queues as they are, and say why in the log and a
  // metric.
  void SetQueues(const absl::StatusOr<QueueConfig>& queues);

 private:
  CoordinatorServer() = default;
  // The store, jobs (recovered), workers, rendezvous store and metrics.
  absl::Status InitJobs(const CoordinatorConfig& config);
  // The gRPC services over them.
  absl::Status InitServices(const CoordinatorConfig& config);
  // The port and /metrics.
  absl::Status Serve(const CoordinatorConfig& config);
  void TickLoop();
  // The health service follows the store: NOT_SERVING while it cannot be
  // reached. A thread of its own, as the tick thread waits for the store.
  void HealthLoop();

  std::unique_ptr<AccessPolicy> access_;
  metrics::Registry registry_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<HttpGateway> http_;
  std::unique_ptr<StoreEngine> engine_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<RendezvousJournal> rendezvous_journal_;  // with a shared store
  std::unique_ptr<RendezvousStore> rendezvous_;
  std::unique_ptr<WorkerMembership> membership_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<LogRelay> logs_;
  std::unique_ptr<SharedCodeArchives> shared_code_;  // with a shared store
  std::unique_ptr<CodeStore> code_;
  std::unique_ptr<CodeUploads> uploads_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<ClusterServiceImpl> cluster_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service_;
  std::unique_ptr<ServerTooling> tooling_;  // health and reflection
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  Notification stop_;
  std::thread ticker_;
  std::thread health_;
};

// The port of a coordinator that does not lead: its services, health
// (never the service "ringmaster.v1.Leader"), /metrics with /ready failing,
// and metric ringmaster_coordinator_leader at 0.
class FollowerPort {
 public:
  FollowerPort() = default;
  FollowerPort(const FollowerPort&) = delete;
  FollowerPort& operator=(const FollowerPort&) = delete;
  // Listens, with `add_services` registering the services; health
  // `serving`.
  absl::Status Start(const CoordinatorConfig& config, bool serving,
                     const std::function<void(grpc::ServerBuilder&)>& add_services);
  // Stops serving at once: the calls of a coordinator that does not lead
  // are reads, and log streams that clients follow elsewhere, so the next
  // role takes the port now.
  ~FollowerPort();
  int port() const { return port_; }

 private:
  metrics::Registry registry_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<ServerTooling> tooling_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// A coordinator while another one leads (coordinator/standby_service.h):
// it answers job reads from the shared store, relays logs from the workers,
// and sends everything else to the leader. Its health is SERVING, but for
// the service "ringmaster.v1.Leader", which is SERVING on the leader alone,
// as is /ready on the metrics port (readiness probes').
class StandbyServer {
 public:
  static absl::StatusOr<std::unique_ptr<StandbyServer>> Start(const CoordinatorConfig& config,
                                                              StoreEngine& engine,
                                                              const Leadership* leadership);
  int port() const { return port_.port(); }

 private:
  StandbyServer() = default;

  std::unique_ptr<AccessPolicy> access_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<StoredJobLogIndex> jobs_;
  std::unique_ptr<LogRelay> logs_;
  std::unique_ptr<StandbyLogService> log_service_;
  std::unique_ptr<StandbyService> service_;
  FollowerPort port_;  // last: stops serving before the services go
};

// A coordinator that cannot reach its store yet (it cannot tell whether
// it leads): its health is NOT_SERVING, /ready fails, and every call is
// refused with UNAVAILABLE saying why, where a closed port would say
// nothing.
class StorelessServer {
 public:
  // `why` gives the store's last error.
  static absl::StatusOr<std::unique_ptr<StorelessServer>> Start(const CoordinatorConfig& config,
                                                                std::function<std::string()> why);
  int port() const { return port_.port(); }

 private:
  StorelessServer() = default;

  std::unique_ptr<RefusingService> service_;
  FollowerPort port_;
};

// The health service name that is SERVING on the leader alone.
inline constexpr char kLeaderHealthService[] = "ringmaster.v1.Leader";

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_COORDINATOR_SERVER_H_
