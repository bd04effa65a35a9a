// `ringmaster up` / `down`: a coordinator and N workers on this machine as
// background daemons, remembered in <state-dir>/cluster.
#ifndef RINGMASTER_CLIENT_LOCAL_CLUSTER_H_
#define RINGMASTER_CLIENT_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct LocalClusterOptions {
  std::string state_dir;
  std::string coordinator_address = "127.0.0.1:7070";  // it listens here
  int workers = 1;
  int slots = 1;      // per worker
  std::string token;  // the admin credential; empty: none (see below)
  // TLS with certificates made in <state_dir>/tls (a CA, the coordinator's,
  // one per worker, the admin's): workers identify by certificate and the
  // CLI by the admin's. Without TLS, workers get `token`, if any.
  bool tls = true;
  // The workers' --rank-user and --rank-uid-range; both empty: theirs (as
  // root, a uid per job).
  std::string rank_user;
  std::string rank_uid_range;
  std::string queues_file;          // the coordinator's --queues
  std::string max_quarantined;      // the coordinator's --max-quarantined; empty: its default
  std::string store;                // the coordinator's --store; empty: SQLite in the state dir
  std::string store_password_file;  // the coordinator's --store-password-file
  std::string regroup_timeout;      // the coordinator's --regroup-timeout; empty: its default
  // The workers' images: --container-runtime (empty: none), and the
  // registries' --registry-auth and --registry-certs, and the cache's
  // --image-cache-limit (empty: the worker's default).
  std::string container_runtime;
  std::string registry_auth;
  std::string registry_certs;
  std::string image_cache_limit;
  absl::Duration ready_timeout = absl::Seconds(30);
};

struct LocalCluster {
  std::string coordinator_address;
  int workers = 0;
  bool already_running = false;
  bool restarted = false;  // part of an earlier cluster was running and was stopped
  // Each daemon's /metrics (free ports), the coordinator's first.
  std::vector<std::string> metrics_addresses;
  // The coordinator's HTTP/JSON API: "https://127.0.0.1:7072".
  std::string http_url;
};

// ${RINGMASTER_STATE_DIR}, else $XDG_STATE_HOME/ringmaster, else (as root)
// /var/lib/ringmaster-local, where ranks of a uid of their own can reach
// their job's files, else $HOME/.local/state/ringmaster.
std::string DefaultStateDir();
inline constexpr char kRootStateDir[] = "/var/lib/ringmaster-local";

// Where `up` keeps the TLS files of the cluster in `state_dir`.
std::string TlsDirOf(const std::string& state_dir);

// The TLS dir of the local cluster in `state_dir` when its coordinator is
// the one at `coordinator` (as a kubeconfig ties credentials to a cluster);
// empty for any other coordinator, or when it has none.
std::string TlsDirFor(const std::string& state_dir, const std::string& coordinator);

// Finds a Ringmaster program (ringmaster-coordinator, ringmaster-worker,
// ringmaster-trainer): in $RINGMASTER_BIN_DIR, beside this executable, or
// in the Bazel output tree it was built into.
absl::StatusOr<std::string> FindProgram(const std::string& name);

// Starts the cluster and waits until every worker has registered. When the
// state dir already has a live cluster, returns it with already_running;
// when only some of its daemons live, stops them and starts the cluster
// anew (restarted). On failure nothing started is left running.
absl::StatusOr<LocalCluster> StartLocalCluster(const LocalClusterOptions& options);

// Stops what StartLocalCluster started: workers first (they stop their
// ranks), then the coordinator; SIGKILL after `grace`. OK when nothing runs.
absl::Status StopLocalCluster(const std::string& state_dir,
                              absl::Duration grace = absl::Seconds(15));

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_LOCAL_CLUSTER_H_
