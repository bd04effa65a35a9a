#include "client/local_cluster.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/certs.h"
#include "client/client.h"
#include "common/net.h"
#include "common/private_dir.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "domain/queue_config.h"
#include "domain/store_config.h"
#include "domain/worker_count.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

std::string LocalWorkerId(int i) { return absl::StrCat("local-", i); }

struct Daemon {
  std::string role;  // "coordinator" | "worker"
  pid_t pid = 0;
  std::string address;
  std::string metrics_address;
};

std::string ClusterFile(const std::string& state_dir) { return state_dir + "/cluster"; }

// The last `count` lines of the file at `path` (a daemon's log).
std::string LastLines(const std::string& path, int count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) > count) lines.pop_front();
  }
  return absl::StrJoin(lines, "\n");
}

std::vector<Daemon> ReadClusterFile(const std::string& state_dir) {
  std::vector<Daemon> daemons;
  std::ifstream in(ClusterFile(state_dir));
  std::string role, address, metrics;
  pid_t pid;
  while (in >> role >> pid >> address >> metrics) daemons.push_back({role, pid, address, metrics});
  return daemons;
}

absl::Status WriteClusterFile(const std::string& state_dir, const std::vector<Daemon>& daemons) {
  const std::string path = ClusterFile(state_dir);
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    for (const Daemon& d : daemons) {
      out << d.role << " " << d.pid << " " << d.address << " " << d.metrics_address << "\n";
    }
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", temp));
  }
  std::error_code error;
  fs::rename(temp, path, error);
  if (error) return absl::InternalError(absl::StrCat("rename ", temp, ": ", error.message()));
  return absl::OkStatus();
}

// True when `pid` is alive and runs the Ringmaster program of `role` (a pid
// from an old file may belong to something else by now).
bool IsOurs(const Daemon& d) {
  std::ifstream in(absl::StrCat("/proc/", d.pid, "/cmdline"));
  std::string argv0;
  std::getline(in, argv0, '\0');
  return !argv0.empty() &&
         fs::path(argv0).filename().string() == absl::StrCat("ringmaster-", d.role);
}

bool AllAlive(const std::vector<Daemon>& daemons) {
  for (const Daemon& d : daemons) {
    if (!IsOurs(d)) return false;
  }
  return true;
}

bool AnyAlive(const std::vector<Daemon>& daemons) {
  for (const Daemon& d : daemons) {
    if (IsOurs(d)) return true;
  }
  return false;
}

// The daemons of a cluster that are ours, each held by a pidfd where the
// kernel gives one: a signal cannot reach another program that took a pid
// over, and a daemon counts as gone once it has exited. Its cmdline reads
// empty a moment earlier, while it is still tearing down, so IsOurs alone
// would call it gone too soon; it is the fallback without pidfds.
class HeldDaemons {
 public:
  explicit HeldDaemons(const std::vector<Daemon>& daemons) {
    for (const Daemon& d : daemons) {
      // Opened first, then checked: the pidfd holds what was checked.
      const int fd = static_cast<int>(syscall(SYS_pidfd_open, d.pid, 0));
      if (!IsOurs(d)) {
        if (fd >= 0) close(fd);
        continue;
      }
      held_.push_back({d, fd});
    }
  }
  ~HeldDaemons() {
    for (const Held& h : held_) {
      if (h.fd >= 0) close(h.fd);
    }
  }
  HeldDaemons(const HeldDaemons&) = delete;
  HeldDaemons& operator=(const HeldDaemons&) = delete;

  void Signal(const std::string& role, int signal) const {
    for (const Held& h : held_) {
      if (h.daemon.role != role) continue;
      if (h.fd < 0 || syscall(SYS_pidfd_send_signal, h.fd, signal, nullptr, 0) != 0) {
        if (IsOurs(h.daemon)) kill(h.daemon.pid, signal);
      }
    }
  }

  // Waits until every daemon of `role` has exited; false at the deadline.
  bool WaitGone(const std::string& role, absl::Time deadline) const {
    for (const Held& h : held_) {
      if (h.daemon.role != role) continue;
      while (Alive(h)) {
        if (absl::Now() >= deadline) return false;
        pollfd p{h.fd, POLLIN, 0};
        if (h.fd < 0 || poll(&p, 1, 20) < 0) absl::SleepFor(absl::Milliseconds(20));
      }
    }
    return true;
  }

  bool AnyAlive() const {
    return std::any_of(held_.begin(), held_.end(), [](const Held& h) { return Alive(h); });
  }

 private:
  struct Held {
    Daemon daemon;
    int fd;  // -1: no pidfd
  };
  static bool Alive(const Held& h) {
    if (h.fd < 0) return IsOurs(h.daemon);
    pollfd p{h.fd, POLLIN, 0};
    return poll(&p, 1, 0) == 0;
  }
  std::vector<Held> held_;
};

// Ends the daemons of `role` with SIGTERM, then SIGKILL at `deadline`.
void StopRole(const HeldDaemons& held, const std::string& role, int signal, absl::Time deadline) {
  held.Signal(role, signal);
  if (held.WaitGone(role, deadline) || signal == SIGKILL) return;
  held.Signal(role, SIGKILL);
  held.WaitGone(role, absl::Now() + absl::Seconds(5));
}

absl::StatusOr<pid_t> StartDaemon(std::vector<std::string> argv, const std::string& log,
                                  const std::string& token) {
  SubprocessSpec spec;
  spec.argv = std::move(argv);
  spec.env = CurrentEnvironment();
  // By environment, not argv, which any user can read with ps; never an
  // inherited one: a daemon's credential is what `up` gives it.
  spec.env.erase("RINGMASTER_TOKEN");
  if (!token.empty()) spec.env["RINGMASTER_TOKEN"] = token;
  spec.output_path = log;
  spec.detach = SubprocessSpec::Detach::kSession;
  return SpawnProcess(spec);
}

absl::Status WaitReady(const LocalClusterOptions& options, const std::vector<Daemon>& daemons) {
  ASSIGN_OR_RETURN(Tls tls, LoadClientTls(options.tls ? TlsDirOf(options.state_dir) : ""));
  auto client =
      std::make_unique<Client>(options.coordinator_address, options.token, tls, absl::Seconds(2));
  const absl::Time deadline = absl::Now() + options.ready_timeout;
  std::string last_error;
  for (;;) {
    auto workers = client->ListWorkers();
    if (workers.ok()) {
      int alive = 0;
      for (const auto& w : *workers) alive += w.state() == v1::WORKER_STATE_ALIVE;
      if (alive >= options.workers) return absl::OkStatus();
      last_error = absl::StrCat(alive, " of ", options.workers, " workers registered");
    } else {
      last_error = std::string(workers.status().message());
      // A channel whose first connection was refused can stay failed for
      // seconds of back-off; a fresh one connects as soon as the port opens.
      client = std::make_unique<Client>(options.coordinator_address, options.token, tls,
                                        absl::Seconds(2));
    }
    int worker = 0;
    for (const Daemon& d : daemons) {
      const std::string log =
          d.role == "worker" ? absl::StrCat(options.state_dir, "/logs/worker-", worker++, ".log")
                             : absl::StrCat(options.state_dir, "/logs/", d.role, ".log");
      if (!IsOurs(d)) {
        return absl::UnavailableError(absl::StrCat("the ", d.role, " (pid ", d.pid,
                                                   ") exited during start-up; the end of ", log,
                                                   ":\n", LastLines(log, 10)));
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("cluster not ready after ", absl::FormatDuration(options.ready_timeout),
                       ": ", last_error, "; see ", options.state_dir, "/logs"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

// The coordinator's --queues, --max-quarantined, --store and
// --regroup-timeout, checked here first so that a bad value is refused by
// `up` itself.
absl::Status AddPolicyFlags(const LocalClusterOptions& options, std::vector<std::string>* argv) {
  if (!options.queues_file.empty()) {
    RETURN_IF_ERROR(LoadQueueConfig(options.queues_file).status());
    argv->insert(argv->end(),
                 {"--queues", std::filesystem::absolute(options.queues_file).string()});
  }
  if (!options.max_quarantined.empty()) {
    RETURN_IF_ERROR(ParseWorkerCount("--max-quarantined", options.max_quarantined).status());
    argv->insert(argv->end(), {"--max-quarantined", options.max_quarantined});
  }
  if (!options.regroup_timeout.empty()) {
    absl::Duration timeout;
    double seconds;
    if (!absl::SimpleAtod(options.regroup_timeout, &seconds) &&
        !absl::ParseDuration(options.regroup_timeout, &timeout)) {
      return absl::InvalidArgumentError(absl::StrCat("--regroup-timeout \"",
                                                     options.regroup_timeout,
                                                     "\" is not a duration such as 60s or 0"));
    }
    argv->insert(argv->end(), {"--regroup-timeout", options.regroup_timeout});
  }
  if (!options.store.empty()) {
    RETURN_IF_ERROR(
        ParseStoreConfig(options.store, options.store_password_file, options.state_dir).status());
    argv->insert(argv->end(), {"--store", options.store});
    if (!options.store_password_file.empty()) {
      argv->insert(argv->end(), {"--store-password-file",
                                 std::filesystem::absolute(options.store_password_file).string()});
    }
  }
  return absl::OkStatus();
}

// Whether the workers run ranks as a user other than this one: a uid per
// job (asked for, or a root worker's default) or another --rank-user.
bool RanksRunAsAnotherUser(const LocalClusterOptions& options) {
  if (!options.rank_user.empty()) {
    absl::StatusOr<RunAs> ranks = ResolveRunAs(options.rank_user);
    return ranks.ok() && ranks->uid != geteuid();
  }
  return !options.rank_uid_range.empty() || geteuid() == 0;
}

// Ranks of other users must pass through every directory above the state
// dir (their job's code, home and checkpoints are below it): FAILED_PRECONDITION
// naming the first they cannot, and what to do.
absl::Status CheckOthersReach(const std::string& state_dir) {
  for (fs::path dir = fs::absolute(state_dir).parent_path();; dir = dir.parent_path()) {
    struct stat st {};
    if (stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "ranks run as a uid of their own and cannot pass through %s (mode %04o) to the state "
          "dir %s: give a --state-dir they can reach (as root the default is %s), or "
          "--rank-user to run every job as one user who can",
          dir.string(), st.st_mode & 07777, state_dir, kRootStateDir));
    }
    if (dir == dir.root_path()) return absl::OkStatus();
  }
}

// The trainer where ranks of other users may run it: a copy in
// <state_dir>/bin when they are, as the program found may lie where only
// this user can reach (a build tree in a home directory).
absl::StatusOr<std::string> TrainerForRanks(const LocalClusterOptions& options,
                                            const std::string& found) {
  if (!RanksRunAsAnotherUser(options)) return found;
  const std::string bin = options.state_dir + "/bin";
  const std::string copy = bin + "/ringmaster-trainer";
  const std::string temp = copy + ".new";
  std::error_code error;
  fs::create_directories(bin, error);
  if (!error) fs::copy_file(found, temp, fs::copy_options::overwrite_existing, error);
  if (error || chmod(bin.c_str(), 0711) != 0 || chmod(temp.c_str(), 0755) != 0 ||
      rename(temp.c_str(), copy.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot copy the trainer to ", copy,
                     " for ranks of other users: ", error ? error.message() : strerror(errno)));
  }
  return copy;
}

// The coordinator's and the workers' command lines: TLS from the state
// dir's certificates, or the admin token by environment.
std::string HttpFile(const std::string& state_dir) { return state_dir + "/http"; }

// The HTTP/JSON API's port: 7072 beside the usual 7070, else a free one
// (several clusters on one machine). Its URL is kept in the state dir.
std::string HttpPortFor(const LocalClusterOptions& options, const std::string& host,
                        const std::string& grpc_port) {
  std::string port = "7072";
  if (grpc_port != "7070") {
    absl::StatusOr<int> free = PickFreePort(host);
    port = free.ok() ? absl::StrCat(*free) : "0";
  }
  std::ofstream(HttpFile(options.state_dir))
      << (options.tls ? "https://" : "http://") << host << ":" << port << "\n";
  return port;
}

// The URL HttpPortFor kept; empty when none.
std::string HttpUrlOf(const std::string& state_dir) {
  std::string url;
  std::ifstream(HttpFile(state_dir)) >> url;
  return url;
}

// The certificates of a TLS cluster, made once, and the daemons' flag for
// them; none without TLS.
absl::StatusOr<std::vector<std::string>> TlsFlagsFor(const LocalClusterOptions& options,
                                                     const std::string& host) {
  if (!options.tls) return std::vector<std::string>{};
  CertsOptions certs;
  certs.hosts = {host};
  for (int i = 0; i < options.workers; ++i) certs.worker_ids.push_back(LocalWorkerId(i));
  RETURN_IF_ERROR(InitCertificates(TlsDirOf(options.state_dir), certs).status());
  return std::vector<std::string>{"--tls-dir", TlsDirOf(options.state_dir)};
}

absl::Status StartDaemons(const LocalClusterOptions& options, std::vector<Daemon>* daemons) {
  ASSIGN_OR_RETURN(std::string coordinator_bin, FindProgram("ringmaster-coordinator"));
  ASSIGN_OR_RETURN(std::string worker_bin, FindProgram("ringmaster-worker"));
  absl::StatusOr<std::string> trainer_bin = FindProgram("ringmaster-trainer");
  if (trainer_bin.ok()) {
    ASSIGN_OR_RETURN(trainer_bin, TrainerForRanks(options, *trainer_bin));
  }
  const std::string host = HostOfAddress(options.coordinator_address);
  const std::string port =
      options.coordinator_address.substr(options.coordinator_address.rfind(':') + 1);
  ASSIGN_OR_RETURN(const std::vector<std::string> tls_flags, TlsFlagsFor(options, host));
  // With TLS, the workers' certificates name them.
  const std::string worker_token = options.tls ? "" : options.token;
  std::vector<int> metrics_ports = PickFreePorts(options.workers + 1, host);
  if (static_cast<int>(metrics_ports.size()) < options.workers + 1) {
    return absl::UnavailableError("cannot find free ports for /metrics");
  }
  std::vector<std::string> argv = {coordinator_bin, "--bind", host, "--port", port,
                                   "--metrics-port", absl::StrCat(metrics_ports[0]), "--http-port",
                                   HttpPortFor(options, host, port), "--advertise-address",
                                   options.coordinator_address, "--state-dir",
                                   options.state_dir + "/coordinator",
                                   // Beside, not inside, the coordinator's own
                                   // 0700 directory: ranks of other users reach it.
                                   "--checkpoint-dir", options.state_dir + "/checkpoints"};
  argv.insert(argv.end(), tls_flags.begin(), tls_flags.end());
  RETURN_IF_ERROR(AddPolicyFlags(options, &argv));
  ASSIGN_OR_RETURN(pid_t pid,
                   StartDaemon(argv, options.state_dir + "/logs/coordinator.log", options.token));
  daemons->push_back(
      {"coordinator", pid, options.coordinator_address, absl::StrCat(host, ":", metrics_ports[0])});

  for (int i = 0; i < options.workers; ++i) {
    ASSIGN_OR_RETURN(int worker_port, PickFreePort(host));
    argv = {worker_bin,
            "--coordinator",
            options.coordinator_address,
            "--bind",
            host,
            "--port",
            absl::StrCat(worker_port),
            "--metrics-port",
            absl::StrCat(metrics_ports[i + 1]),
            "--id",
            LocalWorkerId(i),
            "--slots",
            absl::StrCat(options.slots),
            "--state-dir",
            absl::StrCat(options.state_dir, "/worker-", i)};
    argv.insert(argv.end(), tls_flags.begin(), tls_flags.end());
    if (!options.rank_user.empty()) {
      argv.insert(argv.end(), {"--rank-user", options.rank_user});
    }
    if (!options.rank_uid_range.empty()) {
      argv.insert(argv.end(), {"--rank-uid-range", options.rank_uid_range});
    }
    if (trainer_bin.ok()) argv.insert(argv.end(), {"--trainer-bin", *trainer_bin});
    if (!options.container_runtime.empty()) {
      argv.insert(argv.end(), {"--container-runtime", options.container_runtime});
    }
    if (!options.image_cache_limit.empty()) {
      argv.insert(argv.end(), {"--image-cache-limit", options.image_cache_limit});
    }
    for (const auto& [flag, path] :
         {std::pair<const char*, std::string>{"--registry-auth", options.registry_auth},
          {"--registry-certs", options.registry_certs}}) {
      if (!path.empty()) argv.insert(argv.end(), {flag, std::filesystem::absolute(path).string()});
    }
    ASSIGN_OR_RETURN(pid,
                     StartDaemon(argv, absl::StrCat(options.state_dir, "/logs/worker-", i, ".log"),
                                 worker_token));
    daemons->push_back({"worker", pid, absl::StrCat(host, ":", worker_port),
                        absl::StrCat(host, ":", metrics_ports[i + 1])});
  }
  return absl::OkStatus();
}

}  // namespace

std::string TlsDirOf(const std::string& state_dir) { return state_dir + "/tls"; }

std::string TlsDirFor(const std::string& state_dir, const std::string& coordinator) {
  const std::string dir = TlsDirOf(state_dir);
  if (access((dir + "/ca.crt").c_str(), F_OK) != 0) return "";
  for (const Daemon& d : ReadClusterFile(state_dir)) {
    if (d.role == "coordinator" && d.address == coordinator) return dir;
  }
  return "";
}

std::string DefaultStateDir() {
  if (const char* dir = std::getenv("RINGMASTER_STATE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
    return absl::StrCat(xdg, "/ringmaster");
  }
  if (geteuid() == 0) return kRootStateDir;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home ? home : "/tmp", "/.local/state/ringmaster");
}

absl::StatusOr<std::string> FindProgram(const std::string& name) {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("RINGMASTER_BIN_DIR"); dir && *dir) {
    candidates.push_back(fs::path(dir) / name);
  }
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path dir = self.parent_path();
    candidates.push_back(dir / name);
    // bazel-bin/client/ringmaster next to bazel-bin/<package>/<name>.
    const std::string package = name.substr(name.find('-') + 1);
    candidates.push_back(dir.parent_path() / package / name);
  }
  for (const fs::path& p : candidates) {
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return absl::NotFoundError(absl::StrCat(name, " not found beside ", self.string(),
                                          " nor in $RINGMASTER_BIN_DIR; build it "
                                          "with `bazel build //...` or set RINGMASTER_BIN_DIR"));
}

namespace {

// The daemons' /metrics addresses, the coordinator's first.
std::vector<std::string> MetricsAddresses(const std::vector<Daemon>& daemons) {
  std::vector<std::string> out;
  for (const char* role : {"coordinator", "worker"}) {
    for (const Daemon& d : daemons) {
      if (d.role == role) out.push_back(d.metrics_address);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<LocalCluster> StartLocalCluster(const LocalClusterOptions& options) {
  if (options.workers < 1) return absl::InvalidArgumentError("--workers must be >= 1");
  if (options.slots < 1) return absl::InvalidArgumentError("--slots must be >= 1");
  std::vector<Daemon> existing = ReadClusterFile(options.state_dir);
  if (!existing.empty() && AllAlive(existing)) {
    for (const Daemon& d : existing) {
      if (d.role == "coordinator") {
        int workers = 0;
        for (const Daemon& w : existing) workers += w.role == "worker";
        return LocalCluster{d.address,
                            workers,
                            true,
                            false,
                            MetricsAddresses(existing),
                            HttpUrlOf(options.state_dir)};
      }
    }
  }
  // Part of a cluster is no cluster: stop what is left and start anew. Jobs
  // and their history are kept in the coordinator's database.
  bool restarted = false;
  if (AnyAlive(existing)) {
    RETURN_IF_ERROR(StopLocalCluster(options.state_dir));
    restarted = true;
  }
  // Ranks of another user pass through (not list) it to their job's code in
  // worker-<i>/jobs; what is inside keeps its own modes.
  const bool other_user = RanksRunAsAnotherUser(options);
  if (other_user) RETURN_IF_ERROR(CheckOthersReach(options.state_dir));
  RETURN_IF_ERROR(MakePrivateDir(options.state_dir, other_user ? 0711 : 0700));
  RETURN_IF_ERROR(MakePrivateDir(options.state_dir + "/logs"));
  std::error_code error;

  // A port found free may be taken by another program before its daemon
  // binds it: the daemons start again on newly picked ports, three times
  // at most.
  for (int attempt = 1;; ++attempt) {
    std::vector<Daemon> daemons;
    absl::Status s = StartDaemons(options, &daemons);
    if (s.ok()) s = WriteClusterFile(options.state_dir, daemons);
    if (s.ok()) s = WaitReady(options, daemons);
    if (s.ok()) {
      return LocalCluster{
          options.coordinator_address, options.workers, false, restarted, MetricsAddresses(daemons),
          HttpUrlOf(options.state_dir)};
    }
    const HeldDaemons held(daemons);
    for (const char* role : {"worker", "coordinator"}) {
      StopRole(held, role, SIGKILL, absl::Now() + absl::Seconds(5));
    }
    fs::remove(ClusterFile(options.state_dir), error);
    if (attempt == 3 || !absl::StrContains(s.message(), "in use")) return s;
  }
}

absl::Status StopLocalCluster(const std::string& state_dir, absl::Duration grace) {
  const HeldDaemons held(ReadClusterFile(state_dir));
  const absl::Time deadline = absl::Now() + grace;
  for (const char* role : {"worker", "coordinator"}) StopRole(held, role, SIGTERM, deadline);
  if (held.AnyAlive()) {
    return absl::InternalError(absl::StrCat("some daemons of ", state_dir, " survived SIGKILL"));
  }
  std::error_code error;
  fs::remove(ClusterFile(state_dir), error);
  return absl::OkStatus();
}

}  // namespace ringmaster
