// ringmaster-worker: one per machine; runs the ranks the coordinator places
// on its slots.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint_roots.h"
#include "common/coordinator_targets.h"
#include "common/daemon_flags.h"
#include "common/labels.h"
#include "common/net.h"
#include "common/signals.h"
#include "common/subprocess.h"
#include "common/tls.h"
#include "common/token_file.h"
#include "worker/death_watch.h"
#include "worker/image_store.h"
#include "worker/rank_cgroups.h"
#include "worker/rank_identity.h"
#include "worker/snapshot_store.h"
#include "worker/state_dir_lock.h"
#include "worker/worker_server.h"

namespace {

// The worker's credential (token) and, with --tls-dir, its certificate.
absl::Status LoadCredentials(const std::string& token_file, const std::string& tls_dir,
                             ringmaster::WorkerConfig* config) {
  absl::StatusOr<std::string> token = ringmaster::ReadToken(token_file);
  if (!token.ok()) return token.status();
  config->token = *token;
  if (tls_dir.empty()) return absl::OkStatus();
  absl::StatusOr<ringmaster::TlsFiles> tls =
      ringmaster::LoadTls(tls_dir, "worker-" + config->worker_id);
  if (!tls.ok()) return tls.status();
  config->tls = *std::move(tls);
  return absl::OkStatus();
}

// Memory for snapshots, and the pushing of replicas (docs/checkpoints.md).
void AddSnapshotFlags(CLI::App& app, ringmaster::WorkerConfig* config) {
  config->snapshot_memory_limit_bytes = *ringmaster::ParseSnapshotMemoryLimit("25%");
  app.add_option_function<std::string>(
      "--snapshot-memory-limit",
      [config](const std::string& text) {
        absl::StatusOr<uint64_t> limit = ringmaster::ParseSnapshotMemoryLimit(text);
        if (!limit.ok()) {
          throw CLI::ValidationError("--snapshot-memory-limit",
                                     std::string(limit.status().message()));
        }
        config->snapshot_memory_limit_bytes = *limit;
      },
      "memory for ranks' in-memory snapshots and peers' replicas: a share of this machine's "
      "(\"25%\", the default) or a size (\"4GiB\"); 0: none, restarts resume from disk");
  app.add_option("--replica-time-share", config->replica_time_share,
                 "the share of time this worker may spend pushing its ranks' snapshots to a "
                 "peer's memory (0.03: a push that took 1 s waits 32 s); 0: no replicas")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

void AddImageFlags(CLI::App& app, ringmaster::WorkerConfig* config) {
  app.add_option("--container-runtime", config->container_runtime,
                 "the OCI runtime (runc, crun) that runs ranks of jobs with an image; empty (the "
                 "default): this worker runs no images");
  app.add_option("--container-init", config->container_init,
                 "PID 1 of each rank's container (default: ringmaster-container-init beside this "
                 "program, else on PATH)");
  app.add_option("--cdi-spec-dirs", config->cdi_spec_dirs,
                 "where the CDI specs of the machine's GPUs are (nvidia-ctk cdi generate), for "
                 "ranks in images (env RINGMASTER_CDI_SPEC_DIRS)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--registry-auth", config->registry_auth,
                 "credentials for image registries, in the auth.json format of podman and skopeo");
  app.add_option("--registry-certs", config->registry_certs,
                 "DIR holding <host:port>/ca.crt for registries whose certificates the system "
                 "does not trust (default: /etc/containers/certs.d)");
  app.add_option_function<std::string>(
      "--image-cache-limit",
      [config](const std::string& text) {
        absl::StatusOr<int64_t> limit = ringmaster::ParseImageCacheLimit(text);
        if (!limit.ok()) {
          throw CLI::ValidationError("--image-cache-limit", std::string(limit.status().message()));
        }
        config->image_cache_limit_bytes = *limit;
      },
      "disk for pulled images (\"20GiB\", the default); the least recently used go first, "
      "never one a rank runs in");
  app.add_option("--image-pulls", config->image_pulls, "image pulls at once")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

// The flags that fill WorkerConfig directly.
void AddWorkerFlags(CLI::App& app, ringmaster::WorkerConfig* config) {
  app.add_option("--coordinator", config->coordinator_address, "coordinator host:port")
      ->capture_default_str();
  app.add_option("--nvml-library", config->nvml_library,
                 "NVML to load for GPU metrics (env RINGMASTER_NVML_LIBRARY; a missing "
                 "one means no GPU series)")
      ->capture_default_str();
  app.add_option("--id", config->worker_id, "worker id (default: hostname-port)");
  app.add_option("--rank-user", config->rank_user,
                 "user[:group] every job's ranks run as, one user for all (default: a uid of "
                 "its own per job, when the worker may switch users, as root or with "
                 "CAP_SETUID and CAP_SETGID; else the worker's own)");
  app.add_option("--rank-uid-range", config->rank_uid_range,
                 std::string("uids (and gids) of jobs' own identities, FIRST-LAST; a job's is "
                             "FIRST + its number modulo the range's size (default ") +
                     ringmaster::kDefaultRankUidRange + ")");
  app.add_option_function<int64_t>(
         "--max-code-mb", [config](int64_t mb) { config->max_code_bytes = mb << 20; },
         "most MiB of files a job's uploaded code may unpack to (default 1024)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--slots", config->slots, "CPU slots (default: one per GPU, or 1 without GPUs)");
  app.add_option_function<std::vector<std::string>>(
         "--label",
         [config](const std::vector<std::string>& labels) {
           for (const std::string& text : labels) {
             absl::StatusOr<std::pair<std::string, std::string>> label =
                 ringmaster::ParseLabel(text);
             if (!label.ok())
               throw CLI::ValidationError("--label", std::string(label.status().message()));
             config->labels[label->first] = label->second;
           }
         },
         "key=value a job's worker_selector can ask for; repeatable")
      ->type_name("KEY=VALUE");
  app.add_option("--cpus", config->cpus,
                 "CPUs ranks may reserve with resources.cpus (default: this machine's)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--memory-mb", config->memory_mb,
                 "MiB of memory ranks may reserve with resources.memory_mb (default: this "
                 "machine's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--state-dir", config->state_dir, "rank logs live below it")
      ->capture_default_str();
  app.add_option_function<int64_t>(
         "--shm-size-mb", [config](int64_t mb) { config->shm_size_bytes = mb << 20; },
         "size of each job's own /dev/shm, a tmpfs its ranks on this worker share (default: "
         "half of this machine's memory, as the host's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option_function<std::string>(
      "--checkpoint-roots",
      [config](const std::string& list) {
        absl::StatusOr<std::vector<std::string>> roots =
            ringmaster::ParseCheckpointRoots(list, "--checkpoint-roots");
        if (!roots.ok()) {
          throw CLI::ValidationError("--checkpoint-roots", std::string(roots.status().message()));
        }
        config->checkpoint_roots = *std::move(roots);
      },
      "DIR[,DIR...] where a job's checkpoint directory may lie; the worker makes each job's "
      "there (default: the coordinator's checkpoint root and --checkpoint-roots)");
  AddSnapshotFlags(app, config);
  AddImageFlags(app, config);
  app.add_option("--trainer-bin", config->trainer_program, "the built-in trainer's path")
      ->capture_default_str();
}

// The worker's token goes in plaintext only to loopback, as the CLI's.
absl::Status CheckTokenRoute(const ringmaster::WorkerConfig& config,
                             const ringmaster::DaemonFlags& daemon) {
  if (config.token.empty() || !daemon.tls_dir().empty() || daemon.insecure()) {
    return absl::OkStatus();
  }
  for (const std::string& address : ringmaster::SplitAddresses(config.coordinator_address)) {
    if (!ringmaster::IsLoopbackHost(ringmaster::HostOfAddress(address))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "not sending this worker's token in plaintext to ", address,
          ", beyond loopback: give --tls-dir with the cluster's CA, or --insecure to send it "
          "anyway"));
    }
  }
  return absl::OkStatus();
}

// The defaults the flags start from, the environment's among them.
ringmaster::WorkerConfig DefaultConfig() {
  ringmaster::WorkerConfig config;
  config.coordinator_address = "127.0.0.1:7070";
  config.state_dir = "/var/lib/ringmaster-worker";
  config.trainer_program = "ringmaster-trainer";
  if (const char* nvml = std::getenv("RINGMASTER_NVML_LIBRARY"); nvml && *nvml) {
    config.nvml_library = nvml;
  }
  if (const char* cdi = std::getenv("RINGMASTER_CDI_SPEC_DIRS"); cdi && *cdi) {
    config.cdi_spec_dirs = absl::StrSplit(cdi, ',', absl::SkipEmpty());
  }
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  ringmaster::WorkerConfig config = DefaultConfig();
  ringmaster::DaemonFlags daemon(7080, 7081);
  absl::Duration shutdown_grace = absl::Seconds(10);

  CLI::App app{"Ringmaster worker: runs and supervises rank processes"};
  daemon.AddTo(app,
               "host:port the coordinator reaches this worker at; its host is "
               "MASTER_ADDR when rank 0 runs here (default: bind host or hostname)");
  AddWorkerFlags(app, &config);
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "this worker's credential (from ringmaster-coordinator --issue-worker-token "
                 "ID), in a file of mode 600; else env RINGMASTER_TOKEN");
  ringmaster::AddDurationOption(app, "--shutdown-grace", &shutdown_grace,
                                "on SIGTERM, ranks get this long before SIGKILL");
  CLI11_PARSE(app, argc, argv);
  // Before any thread: each job's /dev/shm (worker/job_shm.h) is mounted
  // where only the worker and its ranks see it, so that it goes with the
  // worker however it ends. A worker that may not mount has no need.
  if (geteuid() == 0 && !ringmaster::EnterOwnMountNamespace()) {
    spdlog::warn("no mount namespace of the worker's own ({}): jobs share the host's /dev/shm",
                 std::strerror(errno));
  }
  // Held for the process's life; before anything that acts on the state dir.
  if (absl::StatusOr<int> lock = ringmaster::LockStateDir(config.state_dir); !lock.ok()) {
    spdlog::critical("{}", std::string(lock.status().message()));
    return 1;
  }

  absl::StatusOr<ringmaster::DaemonAddresses> addresses = daemon.Start("worker");
  if (!addresses.ok()) {
    spdlog::critical("{}", addresses.status().ToString());
    return 1;
  }
  config.listen_address = addresses->listen;
  config.advertise_address = addresses->advertise;
  config.metrics_address = addresses->metrics;
  config.metrics_retention = daemon.metrics_retention();
  if (config.worker_id.empty()) {
    config.worker_id = absl::StrCat(ringmaster::Hostname(), "-", addresses->port);
  }
  if (absl::Status s = LoadCredentials(token_file, daemon.tls_dir(), &config); !s.ok()) {
    spdlog::critical("{}", std::string(s.message()));
    return 2;
  }
  if (absl::Status s = CheckTokenRoute(config, daemon); !s.ok()) {
    spdlog::critical("{}", std::string(s.message()));
    return 2;
  }
  // Forked while this process has one thread; it outlives a killed worker
  // to end the ranks' processes.
  if (absl::Status s = ringmaster::StartDeathWatch(
          ringmaster::RankCgroups::NameFor(config.worker_id, config.state_dir));
      !s.ok()) {
    spdlog::warn("no watcher for this worker's death: {}", s.ToString());
  }
  daemon.WarnWhileInsecure("worker");
  auto server = ringmaster::WorkerServer::Start(config);
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  int signal = ringmaster::WaitForTerminationSignal();
  if (absl::Status fatal = (*server)->fatal(); !fatal.ok()) {
    (*server)->Shutdown(absl::ZeroDuration());
    return 1;
  }
  spdlog::info("signal {}: stopping ranks and shutting down", signal);
  (*server)->Shutdown(shutdown_grace);
  return 0;
}
