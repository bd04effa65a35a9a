// ringmaster-coordinator: the job queue, scheduler, rendezvous store and
// health checker of a Ringmaster cluster.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint_roots.h"
#include "common/daemon_flags.h"
#include "common/private_dir.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "common/token_file.h"
#include "coordinator/api/coordinator_server.h"
#include "coordinator/api/elected_coordinator.h"
#include "coordinator/store/store_factory.h"
#include "domain/spec_validation.h"

namespace {

// The bounds on what callers send: each a flag naming itself in refusals.
void AddLimitFlags(CLI::App& app, ringmaster::CoordinatorConfig* config) {
  ringmaster::SpecLimits& spec = config->manager.spec_limits;
  app.add_option("--max-spec-bytes", spec.max_spec_bytes, "largest job spec accepted")
      ->capture_default_str();
  app.add_option("--max-env-bytes", spec.max_env_bytes,
                 "largest env plus command of a job spec, in bytes")
      ->capture_default_str();
  app.add_option("--max-rendezvous-value-bytes", config->rendezvous.max_value_bytes,
                 "largest rendezvous value")
      ->capture_default_str();
  app.add_option("--max-rendezvous-scope-bytes", config->rendezvous.max_scope_bytes,
                 "most bytes of keys and values one job attempt may store")
      ->capture_default_str();
  ringmaster::AddDurationOption(app, "--retain-finished", &config->manager.retain_finished,
                                "ended jobs are deleted (history, keys, logs) this long after");
  app.add_option("--retain-finished-jobs", config->manager.retain_finished_jobs,
                 "and beyond this many ended jobs, the oldest first")
      ->capture_default_str();
  app.add_option("--max-pending-jobs-per-user", config->manager.max_pending_jobs_per_user,
                 "a user's jobs waiting at most, every queue together (0: no limit; the "
                 "admin's are not counted); a submit over it is RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option_function<int64_t>(
         "--max-upload-mb", [config](int64_t mb) { config->max_upload_bytes = mb << 20; },
         "largest code archive `submit` may upload with a job, in MiB (default 200)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  ringmaster::AddDurationOption(app, "--upload-idle-timeout", &config->upload_idle_timeout,
                                "a code upload that receives nothing this long is ended "
                                "(default 30s)");
  app.add_option("--max-log-line-bytes", config->max_log_line_bytes,
                 "longest line `logs` relays whole; longer ones come in pieces")
      ->capture_default_str();
  app.add_option("--max-stream-queue", config->max_stream_queue,
                 "messages waiting to be written to one worker; past this its stream ends "
                 "and the worker registers again")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

// The root of checkpoints ranks get (--checkpoint-dir, else in the state
// dir), created here: ranks check at start that it is there. A job's own
// checkpoint_dir is the user's to create, on storage every host mounts.
absl::StatusOr<std::string> MakeCheckpointRoot(const std::string& flag,
                                               const std::string& state_dir) {
  const std::string root = flag.empty() ? state_dir + "/checkpoints" : flag;
  std::error_code error;
  // Made here, it is writable by the ranks of every user, as /tmp is (each
  // job's directory is its rank 0's); one that exists is left as it is.
  if (std::filesystem::create_directories(root, error)) {
    std::filesystem::permissions(
        root, std::filesystem::perms::all | std::filesystem::perms::sticky_bit, error);
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("--checkpoint-dir ", root, ": ", error.message()));
  }
  return root;
}

// Prints the credential of the worker or user named, signed with the key in
// `state_dir` (or the shared store's).
// Where a coordinator on a shared store notes that store in its state dir,
// so that a command given that state dir without --store is refused: it
// would issue tokens under a key no coordinator uses.
std::string SharedStoreNote(const std::string& state_dir) { return state_dir + "/shared-store"; }

// OK when the command (issue, rotate) uses the key the coordinators of
// this state dir use; else FAILED_PRECONDITION saying what to give.
absl::Status CheckSameStore(const ringmaster::CoordinatorConfig& config,
                            const ringmaster::StoreEngine& store, const std::string& what) {
  std::ifstream note(SharedStoreNote(config.state_dir));
  std::string shared;
  if (store.shared() || !std::getline(note, shared)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the coordinator of ", config.state_dir, " keeps its credential key in the shared store ",
      shared, ": give --store ", shared, " (and --store-password-file) to ", what));
}

int IssueToken(const ringmaster::CoordinatorConfig& config, ringmaster::StoreEngine& store,
               const std::string& worker_id, const std::string& user) {
  if (!user.empty()) {
    if (absl::Status s = ringmaster::ValidateUserName(user); !s.ok()) {
      std::cerr << "ringmaster-coordinator: --issue-user-token: " << s.message() << std::endl;
      return 2;
    }
  }
  if (absl::Status s = CheckSameStore(config, store, "issue a token it accepts"); !s.ok()) {
    std::cerr << "ringmaster-coordinator: " << s.message() << std::endl;
    return 2;
  }
  absl::StatusOr<std::string> key = ringmaster::LoadCredentialKey(config.state_dir, store);
  if (!key.ok()) {
    std::cerr << "ringmaster-coordinator: " << key.status().message() << std::endl;
    return 1;
  }
  const ringmaster::CredentialSigner signer(*key);
  std::cout << (user.empty() ? signer.Worker(worker_id) : signer.User(user)) << std::endl;
  return 0;
}

// How often running coordinators look for a rotated credential key.
constexpr absl::Duration kKeyCheckInterval = absl::Seconds(10);

// --rotate-credential-key: a new key for every coordinator of the store.
int RotateKey(const ringmaster::CoordinatorConfig& config, ringmaster::StoreEngine& store) {
  absl::Status s = CheckSameStore(config, store, "rotate the key they use");
  if (s.ok()) s = ringmaster::RotateCredentialKey(config.state_dir, store);
  if (!s.ok()) {
    std::cerr << "ringmaster-coordinator: " << s.message() << std::endl;
    return absl::IsFailedPrecondition(s) ? 2 : 1;
  }
  std::cout << "the credential key is new" << (store.shared() ? " in the shared store" : "")
            << ": every token it signed before is void (issue new ones); running coordinators "
               "restart to take it within "
            << absl::FormatDuration(kKeyCheckInterval) << std::endl;
  return 0;
}

// When workers heartbeat and are LOST, how ranks are stopped and restarted.
void AddTimingFlags(CLI::App& app, ringmaster::CoordinatorConfig* config) {
  ringmaster::MembershipOptions& membership = config->membership;
  ringmaster::JobManagerOptions& manager = config->manager;
  ringmaster::AddDurationOption(app, "--heartbeat-interval", &membership.heartbeat_interval,
                                "how often workers heartbeat");
  ringmaster::AddDurationOption(app, "--heartbeat-timeout", &membership.heartbeat_timeout,
                                "a worker without a heartbeat this long is LOST");
  ringmaster::AddDurationOption(app, "--worker-grace", &membership.worker_grace,
                                "a worker whose stream broke is LOST this long after");
  ringmaster::AddDurationOption(app, "--stop-grace", &manager.stop_grace,
                                "SIGTERM to SIGKILL when stopping ranks");
  manager.rank_env.regroup_timeout = absl::Seconds(60);
  ringmaster::AddDurationOption(app, "--regroup-timeout", &manager.rank_env.regroup_timeout,
                                "when a built-in trainer rank fails, how long the others keep "
                                "their processes, waiting for its replacement, before every "
                                "rank restarts (0: every rank restarts at once)");
  ringmaster::AddDurationOption(app, "--restart-backoff-base", &manager.backoff.base,
                                "wait before the first restart (then doubling, jittered)");
  ringmaster::AddDurationOption(app, "--restart-backoff-max", &manager.backoff.max,
                                "longest wait between restarts");
  ringmaster::AddDurationOption(app, "--reserve-after", &manager.scheduling.reserve_after,
                                "a job pending this long reserves the slots it needs as they "
                                "free up (default 60s)");
  app.add_option("--max-preemptions-per-hour", manager.scheduling.max_preemptions_per_hour,
                 "a job preempted this many times within the hour is not preempted again "
                 "until an hour after the first of them (0: no bound)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  ringmaster::AddDurationOption(app, "--min-runtime", &manager.scheduling.min_runtime,
                                "a job running less than this is preempted only when nothing "
                                "else of the preemptor's queue frees enough, and never to take "
                                "back what another queue lent (default 2m)");
  ringmaster::StragglerOptions& stragglers = manager.stragglers;
  app.add_option("--straggler-ratio", stragglers.ratio,
                 "a rank whose compute time per step is this many times its job's median...")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 100.0));
  ringmaster::AddDurationOption(app, "--straggler-for", &stragglers.after,
                                "...for this long is a straggler (default 1m)");
  ringmaster::AddDurationOption(app, "--straggler-window", &stragglers.window,
                                "compute times are compared over this much of the latest "
                                "reports (default 30s)");
  app.add_flag("--preflight-default", manager.preflight_default,
               "jobs whose spec leaves preflight unset run the pre-flight check (default off)");
  ringmaster::HealthOptions& health = manager.health;
  ringmaster::AddDurationOption(app, "--quarantine-window", &health.quarantine_window,
                                "a worker blamed for failures of 2 jobs within this is "
                                "quarantined (default 10m)");
  ringmaster::AddDurationOption(app, "--quarantine-for", &health.quarantine_for,
                                "a quarantine lasts this long, then as long again on "
                                "probation (default 1h)");
  app.add_option_function<std::string>(
         "--max-quarantined",
         [&health](const std::string& text) {
           absl::StatusOr<ringmaster::WorkerCount> limit =
               ringmaster::ParseWorkerCount("--max-quarantined", text);
           if (!limit.ok()) throw CLI::ValidationError(std::string(limit.status().message()));
           health.max_quarantined = *limit;
         },
         "most workers quarantined at once: a share (\"20%\", the default) or a number")
      ->type_name("SHARE|N");
}

// Where jobs are placed: the network's levels.
void AddPlacementFlags(CLI::App& app, ringmaster::CoordinatorConfig* config) {
  app.add_option_function<std::string>(
         "--topology-levels",
         [config](const std::string& text) {
           absl::StatusOr<std::vector<std::string>> levels = ringmaster::ParseTopologyLevels(text);
           if (!levels.ok()) throw CLI::ValidationError(std::string(levels.status().message()));
           config->membership.topology_levels = *levels;
           config->manager.scheduling.topology_levels = *std::move(levels);
         },
         "the network's levels, widest first (\"block,rack,host\"): a worker's domain at each "
         "is its --label of that name (host: its hostname unless labelled); a job's placement "
         "packs or spreads its ranks by them, and ranks are numbered domain by domain")
      ->type_name("LEVEL[,LEVEL...]");
  app.add_option_function<std::string>(
         "--spare-workers",
         [config](const std::string& text) {
           absl::StatusOr<ringmaster::WorkerCount> spares =
               ringmaster::ParseWorkerCount("--spare-workers", text);
           if (!spares.ok()) throw CLI::ValidationError(std::string(spares.status().message()));
           config->manager.scheduling.spare_workers = *spares;
         },
         "workers kept idle for jobs that lose one (lost, cordoned for an XID, quarantined): a "
         "number or a share (\"5%\"), spread over the narrowest --topology-levels level above "
         "host; until one is needed they run only spare_ok jobs (default 0)")
      ->type_name("N|SHARE");
}

// --http-port and --http-bind: the HTTP/JSON API.
struct HttpFlags {
  std::string bind = "127.0.0.1";
  int port = 7072;

  void AddTo(CLI::App& app) {
    app.add_option("--http-port", port, "HTTP/JSON API port (0: none)")->capture_default_str();
    app.add_option("--http-bind", bind,
                   "address the HTTP/JSON API listens on (beyond loopback needs --tls-dir or "
                   "--insecure); HTTPS with --tls-dir")
        ->capture_default_str();
  }
  // "host:port", or empty for none.
  absl::StatusOr<std::string> Address(const ringmaster::DaemonFlags& daemon) const {
    if (port == 0) return std::string();
    if (!ringmaster::IsLoopbackHost(bind) && daemon.tls_dir().empty() && !daemon.insecure()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--http-bind ", bind,
                       " would serve the HTTP API beyond this machine without TLS; give "
                       "--tls-dir, or pass --insecure to do so anyway"));
    }
    return absl::StrCat(bind, ":", port);
  }
};

// The admin token (from `token_file`, else RINGMASTER_TOKEN) and, with
// `tls_dir`, the coordinator's certificate.
absl::Status LoadCredentials(const std::string& token_file, const std::string& tls_dir,
                             ringmaster::CoordinatorConfig* config) {
  ASSIGN_OR_RETURN(config->admin_token, ringmaster::ReadToken(token_file));
  if (!tls_dir.empty()) {
    ASSIGN_OR_RETURN(config->tls, ringmaster::LoadTls(tls_dir, "coordinator"));
  }
  return absl::OkStatus();
}

// --issue-worker-token and --issue-user-token: print a credential, and
// exit; --rotate-credential-key: make a new key, and exit.
void AddIssueFlags(CLI::App& app, std::string* worker, std::string* user, bool* rotate) {
  auto* worker_token = app.add_option("--issue-worker-token", *worker,
                                      "print the credential of the worker with this id, and exit");
  auto* user_token = app.add_option("--issue-user-token", *user,
                                    "print the credential of the user with this name (who owns "
                                    "the jobs it submits), and exit")
                         ->excludes(worker_token);
  app.add_flag("--rotate-credential-key", *rotate,
               "replace the key that signs credentials (with --store, every coordinator's): "
               "every token it signed is void, and running coordinators restart to take it; "
               "then exit")
      ->excludes(worker_token)
      ->excludes(user_token);
}

// The queues of the --queues file, if one is given.
absl::Status LoadQueues(ringmaster::QueuesFile& file, ringmaster::JobManagerOptions* manager) {
  if (file.path().empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(manager->queues, *file.Read(true));
  return absl::OkStatus();
}

// --store (and its password file) into config->store, and its engine.
absl::Status LoadStore(const std::string& store, const std::string& password_file,
                       ringmaster::CoordinatorConfig* config,
                       std::unique_ptr<ringmaster::StoreEngine>* engine) {
  ASSIGN_OR_RETURN(config->store,
                   ringmaster::ParseStoreConfig(store, password_file, config->state_dir));
  ASSIGN_OR_RETURN(*engine, ringmaster::OpenStoreEngine(config->store, config->state_dir));
  return absl::OkStatus();
}

// `path` from the working directory, without "." or ".." parts or a
// trailing '/'.
std::string AbsolutePath(const std::string& path) {
  std::string absolute = std::filesystem::absolute(path).lexically_normal().string();
  while (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  return absolute;
}

// Where state lives: --state-dir, --checkpoint-dir, --store and its
// password file.
void AddStateFlags(CLI::App& app, std::string* state_dir, std::string* checkpoint_dir,
                   std::string* checkpoint_roots, std::string* store,
                   std::string* store_password_file) {
  app.add_option("--state-dir", *state_dir,
                 "holds the credential key, code archives and (by default) coordinator.db")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", *checkpoint_dir,
                 "checkpoint root given to ranks (default: <state-dir>/checkpoints)");
  app.add_option("--checkpoint-roots", *checkpoint_roots,
                 "DIR[,DIR...] where a job's checkpoint_dir may lie, besides --checkpoint-dir "
                 "(default: nowhere else); workers without their own are told these");
  app.add_option("--store", *store,
                 "where jobs are kept: sqlite:///PATH (default: <state-dir>/coordinator.db) or "
                 "postgresql://USER@HOST[:PORT]/DB (libpq's URI), shared by coordinators");
  app.add_option("--store-password-file", *store_password_file,
                 "the PostgreSQL password, in a file only its owner can read (else libpq's "
                 "PGPASSFILE or ~/.pgpass); never in --store");
}

// With a shared store: --lease-timeout, and --peers for ranks.
void AddElectionFlags(CLI::App& app, absl::Duration* lease_timeout, std::string* peers) {
  ringmaster::AddDurationOption(app, "--lease-timeout", lease_timeout,
                                "with a PostgreSQL --store: a leader that has not renewed its "
                                "lease this long is replaced by a standby (default 5s)");
  app.add_option("--peers", *peers,
                 "every coordinator's host:port, comma-separated, in the order ranks try them "
                 "(default: this one's --advertise-address)");
}

char** saved_argv = nullptr;

// The process starts again from the top: its ports, store connections
// and memory go; its jobs are in the store.
[[noreturn]] void RestartInPlace() {
  spdlog::default_logger()->flush();
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // the ports, the store's connections
  execv("/proc/self/exe", saved_argv);
  spdlog::critical("cannot restart: {}", strerror(errno));
  std::abort();
}

// Steps down from leading: the process restarts in place, as a standby.
[[noreturn]] void RestartAsStandby() {
  spdlog::warn("no longer the leader: restarting as a standby");
  RestartInPlace();
}

// How often --queues is looked at for a change.
constexpr absl::Duration kQueuesCheckInterval = absl::Seconds(2);

// The credential key this coordinator uses, against the store's (or state
// dir's) now: a rotation (--rotate-credential-key, on any coordinator of a
// shared store) is seen within kKeyCheckInterval. A key that cannot be
// read is said in the log, and looked at again.
class KeyWatch {
 public:
  explicit KeyWatch(const ringmaster::CoordinatorConfig& config) : state_dir_(config.state_dir) {
    absl::StatusOr<std::unique_ptr<ringmaster::StoreEngine>> engine =
        ringmaster::OpenStoreEngine(config.store, config.state_dir);
    if (engine.ok()) engine_ = *std::move(engine);
    if (engine_) first_ = Read();
  }
  // Whether the key differs from the first reading; it is read at most
  // every kKeyCheckInterval.
  bool Rotated() {
    if (!engine_ || absl::Now() < next_check_) return false;
    next_check_ = absl::Now() + kKeyCheckInterval;
    std::optional<std::string> now = Read();
    if (!first_) {
      first_ = std::move(now);
      return false;
    }
    return now && *now != *first_;
  }

 private:
  std::optional<std::string> Read() {
    absl::StatusOr<std::string> key = ringmaster::LoadCredentialKey(state_dir_, *engine_);
    if (key.ok()) return *std::move(key);
    spdlog::error("cannot read the credential key to see whether it was rotated: {}",
                  std::string(key.status().message()));
    return std::nullopt;
  }

  const std::string state_dir_;
  std::unique_ptr<ringmaster::StoreEngine> engine_;
  std::optional<std::string> first_;
  absl::Time next_check_ = absl::Now() + kKeyCheckInterval;
};

// Waits for a termination signal (its number), giving `set_queues` the
// --queues file read again on SIGHUP and when its bytes change; 0 when the
// credential key was rotated.
template <typename SetQueues>
int WaitForTerminationSignal(ringmaster::QueuesFile& queues, KeyWatch& keys, SetQueues set_queues) {
  auto read = [&](bool always) {
    if (queues.path().empty()) return;
    if (auto changed = queues.Read(always)) set_queues(*changed);
  };
  return ringmaster::WaitForTerminationSignal([&] { read(true); },
                                              [&] {
                                                read(false);
                                                return !keys.Rotated();
                                              },
                                              kQueuesCheckInterval);
}

// After a termination signal, or a rotated key (then the process starts
// again, to take it).
int Ended(int signal) {
  if (signal != 0) {
    spdlog::info("signal {}: shut down", signal);
    return 0;
  }
  spdlog::warn("the credential key was rotated: restarting to take it");
  RestartInPlace();
}

// Runs the only coordinator (SQLite) until a termination signal.
int RunAlone(const ringmaster::CoordinatorConfig& config, ringmaster::QueuesFile& queues) {
  KeyWatch keys(config);
  auto server = ringmaster::CoordinatorServer::Start(config);
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  spdlog::info("ready on port {}", (*server)->port());
  int signal =
      WaitForTerminationSignal(queues, keys, [&](const auto& read) { (*server)->SetQueues(read); });
  (*server)->Shutdown();
  server->reset();
  return Ended(signal);
}

// Runs the coordinators' election against a shared store until a
// termination signal.
int RunElected(ringmaster::CoordinatorConfig config,
               std::unique_ptr<ringmaster::StoreEngine> engine, absl::Duration lease_timeout,
               const std::string& advertise, ringmaster::QueuesFile& queues) {
  KeyWatch keys(config);
  const std::string id =
      absl::StrCat(advertise, "/", getpid(), "-", std::random_device{}() % 100000);
  auto coordinator = ringmaster::ElectedCoordinator::Start(
      std::move(config), std::move(engine),
      {id, advertise, lease_timeout, RestartAsStandby, queues.path()});
  int signal = WaitForTerminationSignal(queues, keys,
                                        [&](const auto& read) { coordinator->SetQueues(read); });
  coordinator.reset();  // a leader releases its lease
  return Ended(signal);
}

// A coordinator of a shared store says so in its state dir (CheckSameStore).
void NoteSharedStore(const std::string& state_dir, const std::string& store) {
  if (!ringmaster::MakePrivateDir(state_dir).ok()) return;
  const std::string text = store + "\n";
  const int fd = open(SharedStoreNote(state_dir).c_str(),
                      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  (void)!write(fd, text.data(), text.size());
  close(fd);
}

// Binds the ports, and fills in what depends on them: the addresses, and
// where ranks find the coordinator and their checkpoints. Nonzero: the
// exit code.
int Listen(ringmaster::DaemonFlags& daemon, const std::string& peers,
           const std::string& checkpoint_dir, ringmaster::CoordinatorConfig* config,
           std::string* advertise) {
  absl::StatusOr<ringmaster::DaemonAddresses> addresses = daemon.Start("coordinator");
  if (!addresses.ok()) {
    spdlog::critical("{}", addresses.status().ToString());
    return 1;
  }
  daemon.WarnWhileInsecure("coordinator");
  config->listen_address = addresses->listen;
  config->metrics_address = addresses->metrics;
  config->metrics_retention = daemon.metrics_retention();
  *advertise = addresses->advertise;
  ringmaster::RankEnvContext& rank_env = config->manager.rank_env;
  rank_env.coordinator_address = peers.empty() ? addresses->advertise : peers;
  absl::StatusOr<std::string> checkpoint_root =
      MakeCheckpointRoot(checkpoint_dir, config->state_dir);
  if (!checkpoint_root.ok()) {
    spdlog::critical("{}", std::string(checkpoint_root.status().message()));
    return 2;
  }
  // One spelling, as --checkpoint-roots have.
  rank_env.checkpoint_dir = AbsolutePath(*checkpoint_root);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  saved_argv = argv;
  ringmaster::CoordinatorConfig config;
  ringmaster::DaemonFlags daemon(7070, 7071);
  std::string checkpoint_dir, checkpoint_roots;
  config.state_dir = "/var/lib/ringmaster";
  ringmaster::JobManagerOptions& manager = config.manager;

  CLI::App app{"Ringmaster coordinator: queues, schedules and supervises jobs"};
  daemon.AddTo(app,
               "host:port ranks use to reach this coordinator "
               "(default: the bind address, or this host's name)");
  std::string store, store_password_file;
  AddStateFlags(app, &config.state_dir, &checkpoint_dir, &checkpoint_roots, &store,
                &store_password_file);
  AddTimingFlags(app, &config);
  AddPlacementFlags(app, &config);
  HttpFlags http;
  http.AddTo(app);
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "the admin credential: a token in this file (mode 600), else env "
                 "RINGMASTER_TOKEN; with one, every caller needs a credential");
  AddLimitFlags(app, &config);
  std::string queues_file;
  app.add_option("--queues", queues_file,
                 "queues, quotas and priority classes (YAML); read again on SIGHUP and when it "
                 "changes, within 4s (default: one "
                 "queue, default, without a quota)");
  std::string issue_worker_token, issue_user_token, peers;
  bool rotate_key = false;
  AddIssueFlags(app, &issue_worker_token, &issue_user_token, &rotate_key);
  absl::Duration lease_timeout = absl::Seconds(5);
  AddElectionFlags(app, &lease_timeout, &peers);
  CLI11_PARSE(app, argc, argv);
  // Every path below it is absolute, whatever directory the daemon runs in.
  config.state_dir = AbsolutePath(config.state_dir);
  absl::StatusOr<std::vector<std::string>> roots =
      ringmaster::ParseCheckpointRoots(checkpoint_roots, "--checkpoint-roots");
  if (!roots.ok()) {
    std::cerr << "ringmaster-coordinator: " << roots.status().message() << std::endl;
    return 2;
  }
  manager.checkpoint_roots = *std::move(roots);
  std::unique_ptr<ringmaster::StoreEngine> engine;
  absl::Status loaded = LoadStore(store, store_password_file, &config, &engine);
  if (loaded.ok() && (!issue_worker_token.empty() || !issue_user_token.empty())) {
    return IssueToken(config, *engine, issue_worker_token, issue_user_token);
  }
  if (loaded.ok() && rotate_key) return RotateKey(config, *engine);
  if (loaded.ok()) loaded = LoadCredentials(token_file, daemon.tls_dir(), &config);
  if (!loaded.ok()) {
    spdlog::critical("{}", std::string(loaded.message()));
    return 2;
  }
  ringmaster::QueuesFile queues(queues_file);
  if (absl::Status s = LoadQueues(queues, &manager); !s.ok()) {
    spdlog::critical("--queues {}", std::string(s.message()));
    return 2;
  }

  std::string advertise;
  if (int failed = Listen(daemon, peers, checkpoint_dir, &config, &advertise)) return failed;
  absl::StatusOr<std::string> http_address = http.Address(daemon);
  if (!http_address.ok()) {
    spdlog::critical("{}", std::string(http_address.status().message()));
    return 1;
  }
  config.http_address = *http_address;
  if (engine->shared()) {
    NoteSharedStore(config.state_dir, store);
    return RunElected(std::move(config), std::move(engine), lease_timeout, advertise, queues);
  }
  return RunAlone(config, queues);
}
