// Wires a worker: rank supervisor, agent gRPC service, and the link to the
// coordinator.
#ifndef RINGMASTER_WORKER_WORKER_SERVER_H_
#define RINGMASTER_WORKER_WORKER_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/metrics_server.h"
#include "common/mutex.h"
#include "common/server_reflection_v1.h"
#include "common/task_pool.h"
#include "common/tls.h"
#include "worker/agent_service.h"
#include "worker/coordinator_link.h"
#include "worker/gpu_watch.h"
#include "worker/image_store.h"
#include "worker/job_code.h"
#include "worker/job_shm.h"
#include "worker/nvml.h"
#include "worker/process_launcher.h"
#include "worker/progress_board.h"
#include "worker/rank_supervisor.h"
#include "worker/snapshot_peers.h"
#include "worker/snapshot_store.h"
#include "worker/stacks_dump.h"
#include "worker/worker_metrics.h"

namespace ringmaster {

struct WorkerConfig {
  std::string worker_id;
  std::string coordinator_address;
  std::string listen_address;     // host:port for the agent service
  std::string advertise_address;  // how the coordinator reaches the agent
  std::string state_dir;          // logs below it
  // Where jobs' checkpoint directories may lie; empty: the coordinator's.
  std::vector<std::string> checkpoint_roots;
  // The size of each job's own /dev/shm (job_shm.h); 0: half of memory.
  int64_t shm_size_bytes = 0;
  std::string trainer_program;
  int slots = 0;                              // 0: one per GPU, or 1 without GPUs
  std::map<std::string, std::string> labels;  // for jobs' worker_selector
  int cpus = 0;                               // offered to ranks' resources.cpus; 0: this machine's
  int64_t memory_mb = 0;        // offered to ranks' resources.memory_mb; 0: this machine's
  std::string metrics_address;  // host:port of /metrics; empty: none
  absl::Duration metrics_retention = absl::Minutes(10);  // of an ended job's series
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string token;  // this worker's credential, when the cluster checks callers
  Tls tls;            // worker-<id>.crt/.key and ca.crt; nullopt: plaintext
  // "user[:group]" ranks run as; empty: "nobody" when the worker is root,
  // else the worker's own user.
  std::string rank_user;
  std::string rank_uid_range;                 // empty: the default, unless rank_user is given
  int64_t max_code_bytes = int64_t{1} << 30;  // a job's unpacked code, at most
  // Ranks' snapshot segments and peers' replicas (snapshot_store.h), at most.
  uint64_t snapshot_memory_limit_bytes = 0;
  // The share of time spent pushing snapshots to peers (snapshot_peers.h).
  double replica_time_share = 0.03;
  // Jobs with an image (image_store.h, container_launch.h): the OCI runtime
  // their ranks run under; empty: this worker runs no images.
  std::string container_runtime;
  std::string container_init;  // empty: ringmaster-container-init beside the worker, or on PATH
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string registry_auth;   // auth.json
  std::string registry_certs;  // <dir>/<host:port>/ca.crt
  int64_t image_cache_limit_bytes = int64_t{20} << 30;
  int image_pulls = 2;  // at once
};

class WorkerServer {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Start(const WorkerConfig& config);
  // Stops every rank (SIGTERM, then SIGKILL after `grace`) and disconnects.
  void Shutdown(absl::Duration grace);
  // Why the worker must stop on its own (the coordinator refused its id);
  // it sends this process SIGTERM when that happens.
  absl::Status fatal();
  ~WorkerServer();

 private:
  WorkerServer() = default;
  absl::Status Init(const WorkerConfig& config);
  // Its parts, in the order Init makes them.
  absl::Status InitSupervisor(const WorkerConfig& config, const std::vector<v1::Gpu>& gpus,
                              int slots);
  // The image cache and the OCI runtime's setup, for --container-runtime.
  absl::Status InitImages(const WorkerConfig& config, RankSupervisorOptions* options);
  void InitLink(const WorkerConfig& config, v1::RegisterWorker identity);
  void InitMetrics(const WorkerConfig& config, std::shared_ptr<Nvml> nvml);
  // Errors of the GPUs, to metrics_ and the coordinator.
  void InitGpuWatch(std::shared_ptr<Nvml> nvml);
  void InitAgent(const WorkerConfig& config);
  absl::Status Serve(const WorkerConfig& config);
  void RunLink();
  // A command of the coordinator's: start ranks, stop a job, delete logs,
  // take stacks.
  void OnCommand(const v1::CoordinatorMessage& command);
  // Takes the stacks of the attempt's ranks here (stacks_dump.h) on dumps_,
  // and sends where they are.
  void DumpStacksOf(const v1::DumpStacks& dump);
  // Rank processes alive now, for registrations and heartbeats.
  std::vector<v1::RunningRank> RunningRanks();

  std::unique_ptr<PosixProcessLauncher> launcher_;
  ProgressBoard progress_;
  metrics::Registry registry_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<JobCode> code_;
  std::unique_ptr<JobShm> shm_;  // null: ranks see the host's /dev/shm
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<ImageStore> images_;  // null: no images
  std::unique_ptr<GrpcPeerAgents> peer_agents_;
  std::unique_ptr<SnapshotPeers> snapshot_peers_;
  bool checkpoint_roots_given_ = false;  // --checkpoint-roots
  std::unique_ptr<RankSupervisor> supervisor_;
  std::unique_ptr<CoordinatorLink> link_;
  std::unique_ptr<GpuWatch> gpu_watch_;
  std::unique_ptr<AgentAccess> access_;
  std::unique_ptr<AgentServiceImpl> agent_;
  std::unique_ptr<ServerTooling> tooling_;  // health and reflection
  std::unique_ptr<grpc::Server> server_;
  std::thread link_thread_;
  std::string worker_id_;
  Mutex mu_;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> dumping_ ABSL_GUARDED_BY(mu_);  // "job/attempt" being dumped
  // Declared last: destroyed first, so that no dump outlives what it uses.
  TaskPool dumps_{1};
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_WORKER_SERVER_H_
