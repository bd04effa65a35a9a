#include "worker/worker_server.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/coordinator_targets.h"
#include "common/net.h"
#include "common/parse_errors.h"
#include "common/private_dir.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/tls.h"
#include "domain/image_reference.h"
#include "python/python_module.h"
#include "worker/code_fetch.h"
#include "worker/gpu_discovery.h"
#include "worker/machine.h"
#include "worker/nvml.h"
#include "worker/rank_identity.h"

namespace ringmaster {
namespace {

// Writes the ringmaster Python package (readable by every user: ranks may
// run as another) below `dir`; returns `dir`.
absl::StatusOr<std::string> InstallPythonPackage(const std::string& dir) {
  for (const PythonFile& file : PythonModuleFiles()) {
    const std::filesystem::path path = std::filesystem::path(dir) / file.path;
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
    // dir and the package's directory: every user reads them.
    for (const std::string& d : {dir, path.parent_path().string()}) {
      if (chmod(d.c_str(), 0755) != 0) return ErrnoError("cannot make " + d);
    }
    const std::string temp = path.string() + ".new";
    {
      std::ofstream out(temp, std::ios::trunc);
      out << file.content;
      if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", temp));
    }
    if (chmod(temp.c_str(), 0644) != 0 || rename(temp.c_str(), path.c_str()) != 0) {
      return ErrnoError("cannot install " + path.string());
    }
  }
  return dir;
}

// Names this worker process: a restarted worker is a new incarnation.
std::string NewIncarnation() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

// The GPUs this worker offers: those NVML lists (or CUDA_VISIBLE_DEVICES of
// them); none, saying why, without NVML.
std::vector<v1::Gpu> OfferedGpus(const absl::StatusOr<std::unique_ptr<Nvml>>& nvml) {
  std::string why_none = nvml.ok() ? "" : std::string(nvml.status().message());
  std::vector<v1::Gpu> gpus;
  if (nvml.ok()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    gpus = DiscoverGpus(**nvml, visible ? std::optional<std::string>(visible) : std::nullopt,
                        &why_none);
  }
  if (gpus.empty()) spdlog::info("no GPU: {}", why_none);
  return gpus;
}

// What the worker registers as: its id, address, slots, GPUs, labels,
// CPUs and memory.
v1::RegisterWorker Identity(const WorkerConfig& config, const std::vector<v1::Gpu>& gpus) {
  v1::RegisterWorker identity;
  identity.set_worker_id(config.worker_id);
  identity.set_address(config.advertise_address);
  identity.set_hostname(Hostname());
  identity.set_incarnation(NewIncarnation());
  identity.set_slots(config.slots > 0 ? config.slots
                                      : std::max<int>(1, static_cast<int>(gpus.size())));
  for (const v1::Gpu& gpu : gpus) *identity.add_gpus() = gpu;
  if (!gpus.empty() && identity.slots() != static_cast<int>(gpus.size())) {
    spdlog::warn("--slots {} ignored: a GPU worker has one slot per GPU ({})", identity.slots(),
                 gpus.size());
    identity.set_slots(static_cast<int>(gpus.size()));
  }
  *identity.mutable_labels() = {config.labels.begin(), config.labels.end()};
  // Jobs with an image are placed by it (scheduling_views.cc).
  if (!config.container_runtime.empty()) {
    (*identity.mutable_labels())[kImagesLabel] = kImagesLabelValue;
  }
  identity.set_cpus(config.cpus > 0 ? config.cpus : MachineCpus());
  identity.set_memory_mb(config.memory_mb > 0 ? config.memory_mb : MachineMemoryBytes() >> 20);
  return identity;
}

// The environment every rank starts with, before its job's own.
absl::StatusOr<std::map<std::string, std::string>> RankBaseEnv(const WorkerConfig& config) {
  std::map<std::string, std::string> env;
  // `import ringmaster` in a rank's program: report() and the DDP hook.
  ASSIGN_OR_RETURN(env["PYTHONPATH"], InstallPythonPackage(config.state_dir + "/python"));
  // Ranks report progress to this worker and bind collectives on its host.
  env["RINGMASTER_WORKER_ADDRESS"] = config.advertise_address;
  env["RINGMASTER_WORKER_ID"] = config.worker_id;
  // Ranks check this worker's agent and the coordinator against the CA.
  if (config.tls) env["RINGMASTER_TLS_CA"] = config.tls->ca_pem;
  env["RINGMASTER_HOST"] = HostOfAddress(config.advertise_address);
  // The sanitizers' options too, so that ranks of a sanitizer build of the
  // trainer run as the worker does.
  for (const char* name : {"PATH", "HOME", "LANG", "TMPDIR", "USER", "ASAN_OPTIONS", "LSAN_OPTIONS",
                           "TSAN_OPTIONS", "UBSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  if (env.count("PATH") == 0) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  return env;
}

// The container init's path on the host: `given`, or
// ringmaster-container-init beside this program, else on PATH.
absl::StatusOr<std::string> ContainerInit(const std::string& given) {
  constexpr char kName[] = "ringmaster-container-init";
  if (given.empty()) {
    std::error_code error;
    const std::filesystem::path beside =
        std::filesystem::read_symlink("/proc/self/exe", error).parent_path() / kName;
    if (!error && access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  const char* path = std::getenv("PATH");
  absl::StatusOr<std::string> found =
      ResolveProgram(given.empty() ? kName : given, path != nullptr ? path : "/usr/bin:/bin");
  if (!found.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--container-init: ", found.status().message(),
                     " (installed with the worker as ", kName, ")"));
  }
  return std::filesystem::absolute(*found).string();
}

// Who ranks run as (a uid per job, or one user for all), what that loses,
// and the state dir's mode that lets such users reach their job's code.
absl::Status ChooseRankUsers(const WorkerConfig& config, RankSupervisorOptions* options) {
  ASSIGN_OR_RETURN(
      options->identities,
      ChooseRankIdentities(config.rank_user, config.rank_uid_range, options->jobs_dir));
  const RankIdentities& identities = options->identities;
  const std::optional<RunAs>& shared = identities.shared();
  if (shared) {
    options->base_env["HOME"] = shared->home;
    options->base_env["USER"] = shared->name.substr(0, shared->name.find(':'));
  }
  if (identities.per_job()) {
    options->hide_other_jobs_processes = CanHideOtherUsersProcesses();
    if (!options->hide_other_jobs_processes) {
      spdlog::warn(
          "no mount namespace for a /proc with hidepid here: ranks of different jobs "
          "can list each other's processes (they still cannot signal, trace or read "
          "them)");
    }
  } else {
    spdlog::warn(
        "every job's ranks run as one user: a rank of one job may signal, trace and "
        "read another job's ranks, and write in its code (see docs/security.md)");
  }
  spdlog::info("ranks run as {}", identities.Describe());
  if (identities.per_job() || (shared && shared->uid != geteuid())) {
    // Ranks of another user pass through the state dir to their job's code
    // (jobs/<job>/code, theirs); they cannot list it, and logs/ stays 0750.
    if (chmod(config.state_dir.c_str(), 0711) != 0) {
      return ErrnoError("cannot set the mode of " + config.state_dir);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(const WorkerConfig& config) {
  std::unique_ptr<WorkerServer> server(new WorkerServer);
  RETURN_IF_ERROR(server->Init(config));
  return server;
}

// Each component in turn. The supervisor's callbacks send through link_,
// made after it: they run only for ranks that the link's commands start.
// The link's hooks and the agent reach metrics_ and access_, made after
// the link but before anything is served or the link runs.
absl::Status WorkerServer::Init(const WorkerConfig& config) {
  worker_id_ = config.worker_id;
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Load(config.nvml_library);
  const std::vector<v1::Gpu> gpus = OfferedGpus(nvml);
  v1::RegisterWorker identity = Identity(config, gpus);
  RETURN_IF_ERROR(InitSupervisor(config, gpus, identity.slots()));
  const int slots = identity.slots();
  InitLink(config, std::move(identity));
  std::shared_ptr<Nvml> gpus_nvml = nvml.ok() ? *std::move(nvml) : nullptr;
  InitMetrics(config, gpus_nvml);
  InitGpuWatch(gpus_nvml);
  InitAgent(config);
  RETURN_IF_ERROR(Serve(config));
  link_thread_ = std::thread([this] { RunLink(); });
  spdlog::info("worker {} serving on {} with {} slots; coordinator {}", config.worker_id,
               config.listen_address, slots, config.coordinator_address);
  return absl::OkStatus();
}

absl::Status WorkerServer::InitImages(const WorkerConfig& config, RankSupervisorOptions* options) {
  // The runtime needs root for a container's namespaces and mounts.
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--container-runtime ", config.container_runtime,
        ": ranks in images need a worker that runs as root (this one is uid ", geteuid(), ")"));
  }
  ASSIGN_OR_RETURN(options->container.init, ContainerInit(config.container_init));
  // Found once: a worker whose runtime is missing says so at start.
  ASSIGN_OR_RETURN(options->container.runtime, ResolveRuntime(config.container_runtime));
  options->container.bundles_dir = config.state_dir + "/bundles";
  options->container.state_dir = config.state_dir + "/containers";
  RETURN_IF_ERROR(MakePrivateDir(options->container.bundles_dir));
  RETURN_IF_ERROR(MakePrivateDir(options->container.state_dir));
  // Before the cache looks for what is not its own: an earlier worker's
  // containers hold their images' files until they are gone.
  SweepContainers(options->container);
  ImageStoreOptions images;
  images.dir = config.state_dir + "/images";
  images.auth_file = config.registry_auth;
  images.certs_dir = config.registry_certs;
  images.cache_limit_bytes = config.image_cache_limit_bytes;
  images.max_pulls = config.image_pulls;
  ASSIGN_OR_RETURN(images_, ImageStore::Open(images));
  options->images = images_.get();
  options->image_pulls = config.image_pulls;
  options->cdi_spec_dirs = config.cdi_spec_dirs;
  spdlog::info("images run under {}; cache {} MiB in {}", config.container_runtime,
               config.image_cache_limit_bytes >> 20, images.dir);
  return absl::OkStatus();
}

absl::Status WorkerServer::InitSupervisor(const WorkerConfig& config,
                                          const std::vector<v1::Gpu>& gpus, int slots) {
  RankSupervisorOptions options;
  snapshots_ = std::make_unique<SnapshotStore>(config.snapshot_memory_limit_bytes, slots);
  options.snapshots = snapshots_.get();
  peer_agents_ = std::make_unique<GrpcPeerAgents>(config.tls);
  SnapshotPeers::Options peers;
  peers.time_share = config.replica_time_share;
  snapshot_peers_ = std::make_unique<SnapshotPeers>(snapshots_.get(), peer_agents_.get(), peers,
                                                    RealClock::Get());
  snapshot_peers_->Start();
  options.snapshot_peers = snapshot_peers_.get();
  spdlog::info("snapshot memory limit {} MiB: {} MiB for each slot's rank",
               config.snapshot_memory_limit_bytes >> 20, snapshots_->segment_bytes() >> 20);
  if (!config.container_runtime.empty()) RETURN_IF_ERROR(InitImages(config, &options));
  options.log_dir = config.state_dir + "/logs";
  RETURN_IF_ERROR(MakePrivateDir(options.log_dir, 0750));
  options.jobs_dir = config.state_dir + "/jobs";
  options.gpus = gpus;
  options.trainer_program = config.trainer_program;
  options.checkpoint_roots = config.checkpoint_roots;
  checkpoint_roots_given_ = !config.checkpoint_roots.empty();
  ASSIGN_OR_RETURN(options.base_env, RankBaseEnv(config));
  RETURN_IF_ERROR(ChooseRankUsers(config, &options));
  code_ = std::make_unique<JobCode>(
      options.jobs_dir, UnpackLimits{config.max_code_bytes},
      CoordinatorCodeFetch(
          std::make_shared<CoordinatorTargets>(config.coordinator_address, config.tls),
          config.token));
  options.code = code_.get();
  // Each job's own /dev/shm, where its ranks get a mount namespace: a uid
  // per job on a worker that may mount, or a container.
  const bool ranks_get_namespaces =
      options.identities.per_job() && options.hide_other_jobs_processes;
  if (ranks_get_namespaces || !config.container_runtime.empty()) {
    shm_ = std::make_unique<JobShm>(config.state_dir + "/shm", config.shm_size_bytes > 0
                                                                   ? config.shm_size_bytes
                                                                   : DefaultShmBytes());
    options.shm = shm_.get();
  }
  if (!ranks_get_namespaces) {
    spdlog::warn(
        "ranks on the host share its /dev/shm: each job has one of its own with a uid per job "
        "on a worker that may mount, or in an image");
  }
  // Kills what an earlier worker of this id left before anything registers.
  launcher_ = std::make_unique<PosixProcessLauncher>(
      RankCgroups::NameFor(config.worker_id, config.state_dir));
  RankSupervisor::Callbacks callbacks;
  callbacks.started = [this](const v1::RankStarted& started) {
    v1::WorkerMessage m;
    *m.mutable_rank_started() = started;
    link_->Send(m);
  };
  callbacks.exited = [this](const v1::RankExited& exited) {
    v1::WorkerMessage m;
    *m.mutable_rank_exited() = exited;
    // The final report travels with the exit, so it cannot miss the job's
    // last transition.
    if (auto last = progress_.Forget(exited.rank())) {
      *m.mutable_rank_exited()->mutable_last_progress() = *last;
    }
    link_->Send(m);
  };
  supervisor_ = std::make_unique<RankSupervisor>(launcher_.get(), options, std::move(callbacks));
  return absl::OkStatus();
}

void WorkerServer::InitLink(const WorkerConfig& config, v1::RegisterWorker identity) {
  CoordinatorLinkOptions options;
  options.coordinator_address = config.coordinator_address;
  options.token = config.token;
  options.tls = config.tls;
  options.identity = std::move(identity);
  CoordinatorLink::Hooks hooks;
  hooks.on_command = [this](const v1::CoordinatorMessage& command) { OnCommand(command); };
  hooks.running_ranks = [this] { return RunningRanks(); };
  hooks.progress = [this] { return progress_.TakeChanged(); };
  hooks.usage = [this](v1::Heartbeat* beat) {
    metrics_->FillUsage(beat);
    for (v1::HeldSnapshots& held : snapshots_->Held()) *beat->add_snapshots() = std::move(held);
    for (v1::ImagePull& pull : supervisor_->Pulls()) *beat->add_pulls() = std::move(pull);
    if (images_ == nullptr) return;
    // The most recently used, so that a cache of many names keeps the
    // heartbeat small.
    std::vector<CachedImage> cache = images_->List();
    constexpr size_t kMostImages = 256;
    if (cache.size() > kMostImages) {
      std::partial_sort(
          cache.begin(), cache.begin() + kMostImages, cache.end(),
          [](const CachedImage& a, const CachedImage& b) { return a.last_used > b.last_used; });
      cache.resize(kMostImages);
    }
    for (const CachedImage& cached : cache) {
      v1::CachedImage* image = beat->add_images();
      image->set_reference(cached.reference);
      image->set_digest(cached.digest);
      image->set_bytes(cached.bytes);
      image->set_ranks(cached.users);
      image->set_last_used_unix_ms(absl::ToUnixMillis(cached.last_used));
    }
  };
  hooks.registered = [this](const v1::Registered& registered) {
    access_->SetAgentCredential(registered.agent_credential());
    if (registered.checkpoint_roots().empty() && !checkpoint_roots_given_) {
      spdlog::warn(
          "the coordinator names no checkpoint roots (a version before them?): ranks with a "
          "checkpoint directory will not start here until it does, or --checkpoint-roots says");
    }
    supervisor_->SetCoordinatorCheckpointRoots(
        {registered.checkpoint_roots().begin(), registered.checkpoint_roots().end()});
  };
  hooks.logged_jobs = [this] { return supervisor_->LoggedJobs(); };
  link_ = std::make_unique<CoordinatorLink>(options, std::move(hooks));
}

void WorkerServer::OnCommand(const v1::CoordinatorMessage& command) {
  if (command.has_start_rank()) {
    const v1::StartRank& start = command.start_rank();
    access_->AllowPeers(start.rank().job_id(), start.rank().attempt(), start.replica_credential());
    supervisor_->Start(start);
  } else if (command.has_stop_job()) {
    const v1::StopJob& stop = command.stop_job();
    supervisor_->StopJob(stop.job_id(), stop.attempt(), absl::Milliseconds(stop.grace_ms()));
  } else if (command.has_delete_job_logs()) {
    snapshots_->Forget(command.delete_job_logs().job_id());
    access_->ForgetPeers(command.delete_job_logs().job_id());
    supervisor_->DeleteLogs(command.delete_job_logs().job_id());
  } else if (command.has_job_ended()) {
    snapshots_->Forget(command.job_ended().job_id());
    access_->ForgetPeers(command.job_ended().job_id());
  } else if (command.has_dump_stacks()) {
    DumpStacksOf(command.dump_stacks());
  }
}

void WorkerServer::DumpStacksOf(const v1::DumpStacks& dump) {
  const std::string key = absl::StrCat(dump.job_id(), "/", dump.attempt());
  {
    MutexLock lock(&mu_);
    if (!dumping_.insert(key).second) return;  // one at a time per attempt
  }
  std::vector<DumpTarget> targets;
  for (const RankSupervisor::Process& p : supervisor_->RunningProcesses()) {
    if (p.rank.job_id() != dump.job_id() || p.rank.attempt() != dump.attempt()) continue;
    targets.push_back({p.rank, p.pid,
                       supervisor_->LogPath(p.rank.job_id(), p.rank.attempt(), p.rank.rank()),
                       supervisor_->RankDirPath(p.rank), p.run_as, p.in_image});
  }
  // eu-stack and a Python rank's dump take seconds: off the link's thread.
  dumps_.Post([this, dump, key, targets = std::move(targets)]() mutable {
    for (DumpTarget& target : targets) {
      if (target.in_image) target.pid = ContainedCommand(target.pid);
    }
    v1::WorkerMessage m;
    *m.mutable_stacks_dumped() =
        DumpStacks(dump.job_id(), dump.attempt(), targets, worker_id_, dump.why());
    link_->Send(m);
    MutexLock lock(&mu_);
    dumping_.erase(key);
  });
}

void WorkerServer::InitGpuWatch(std::shared_ptr<Nvml> nvml) {
  if (nvml == nullptr) return;
  if (absl::Status s = nvml->WatchEvents(); !s.ok()) {
    spdlog::warn("not watching GPU errors: {}", std::string(s.message()));
    return;
  }
  gpu_watch_ = std::make_unique<GpuWatch>(
      GpuWatch::Source{[nvml](absl::Duration wait) { return nvml->WaitEvent(wait); },
                       [nvml] { return nvml->Sample(); }},
      GpuWatch::Sinks{[this](int gpu, int xid) { metrics_->CountXid(gpu, xid); },
                      [this](const v1::GpuError& error) {
                        v1::WorkerMessage m;
                        *m.mutable_gpu_error() = error;
                        link_->Send(m);
                      }},
      RealClock::Get());
  gpu_watch_->Start();
}

void WorkerServer::InitMetrics(const WorkerConfig& config, std::shared_ptr<Nvml> nvml) {
  metrics_ = std::make_unique<WorkerMetrics>(
      &registry_, config.worker_id, std::move(nvml),
      [this] {
        std::vector<RankProcess> out;
        for (const auto& p : supervisor_->RunningProcesses())
          out.push_back({p.rank, p.pid, p.slot});
        return out;
      },
      RealClock::Get(), config.metrics_retention);
  // What the snapshot store holds, read at each scrape.
  metrics::Family<metrics::Gauge>& held = registry_.AddGauge(
      "ringmaster_worker_snapshot_memory_bytes",
      "Memory held for snapshots: this worker's ranks' segments (kind=segments) and peers' "
      "replicas (kind=replicas).",
      {{"worker", config.worker_id}});
  registry_.AddCollectCallback([this, &held] {
    held.Add({{"kind", "segments"}}).Set(static_cast<double>(snapshots_->reserved_bytes()));
    held.Add({{"kind", "replicas"}}).Set(static_cast<double>(snapshots_->replica_bytes()));
  });
}

void WorkerServer::InitAgent(const WorkerConfig& config) {
  // A worker with a credential of its own belongs to a cluster that checks
  // callers; so does its agent.
  access_ = std::make_unique<AgentAccess>(
      !config.token.empty() || config.tls.has_value(),
      [this](const std::string& token) { return supervisor_->RankOfJobToken(token); },
      config.tls.has_value());
  agent_ = std::make_unique<AgentServiceImpl>(
      supervisor_.get(), &progress_, [this](const v1::RankProgress& p) { metrics_->OnProgress(p); },
      access_.get(), snapshots_.get());
}

absl::Status WorkerServer::Serve(const WorkerConfig& config) {
  if (!config.metrics_address.empty()) {
    ASSIGN_OR_RETURN(metrics_server_, MetricsServer::Start(config.metrics_address, &registry_));
  }
  tooling_ = std::make_unique<ServerTooling>(
      std::vector<std::string>{v1::WorkerAgentService::service_full_name()});
  grpc::ServerBuilder builder;
  tooling_->AddTo(builder);
  int port = 0;
  builder.AddListeningPort(config.listen_address, ServerCredentials(config.tls), &port);
  // A port another server holds fails to bind here, rather than shares it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(agent_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(ParseErrorInterceptor({v1::WorkerAgentService::service_full_name()}));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen_address));
  }
  tooling_->Serving(server_.get(), true);
  return absl::OkStatus();
}

// Until shutdown; a refusal the worker cannot outlive (its id is another
// worker's) stops the process.
void WorkerServer::RunLink() {
  absl::Status status = link_->Run();
  if (status.ok()) return;
  spdlog::critical("{}", std::string(status.message()));
  MutexLock lock(&mu_);
  fatal_ = status;
  kill(getpid(), SIGTERM);  // wakes main's wait for a termination signal
}

std::vector<v1::RunningRank> WorkerServer::RunningRanks() {
  std::vector<v1::RunningRank> out;
  for (const RankSupervisor::Process& p : supervisor_->RunningProcesses()) {
    v1::RunningRank r;
    *r.mutable_rank() = p.rank;
    r.set_slot(p.slot);
    for (int gpu : p.gpus) r.add_gpus(gpu);
    r.set_cpus(p.cpus);
    r.set_memory_mb(p.memory_mb);
    r.set_pid(p.pid);
    std::error_code error;
    const auto bytes = std::filesystem::file_size(
        supervisor_->LogPath(p.rank.job_id(), p.rank.attempt(), p.rank.rank()), error);
    r.set_output_bytes(error ? 0 : static_cast<int64_t>(bytes));
    r.set_progress_reports(progress_.Reports(p.rank));
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status WorkerServer::fatal() {
  MutexLock lock(&mu_);
  return fatal_;
}

void WorkerServer::Shutdown(absl::Duration grace) {
  tooling_->Serving(server_.get(), false);  // before the ranks are stopped
  metrics_server_.reset();
  supervisor_->StopAll(grace);
  if (!supervisor_->WaitAllExited(grace + absl::Seconds(5))) {
    spdlog::error("ranks still running after shutdown grace");
  }
  link_->Shutdown();
  if (link_thread_.joinable()) link_thread_.join();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

WorkerServer::~WorkerServer() {
  if (link_thread_.joinable()) Shutdown(absl::ZeroDuration());
  supervisor_.reset();  // joins rank threads before the launcher goes
}

}  // namespace ringmaster
