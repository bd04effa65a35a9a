#include "worker/worker_server.h"

#include <sched.h>
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
#include "common/net.h"
#include "common/parse_errors.h"
#include "common/private_dir.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "python/python_module.h"
#include "worker/code_fetch.h"
#include "worker/gpu_discovery.h"
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
      if (chmod(d.c_str(), 0755) != 0) {
        return absl::InternalError(absl::StrCat("cannot make ", d, ": ", strerror(errno)));
      }
    }
    const std::string temp = path.string() + ".new";
    {
      std::ofstream out(temp, std::ios::trunc);
      out << file.content;
      if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", temp));
    }
    if (chmod(temp.c_str(), 0644) != 0 || rename(temp.c_str(), path.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat("cannot install ", path.string(), ": ", strerror(errno)));
    }
  }
  return dir;
}

// The CPUs this process may run on.
int MachineCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

int64_t MachineMemoryMb() {
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? pages * page_size >> 20 : 0;
}

// Names this worker process: a restarted worker is a new incarnation.
std::string NewIncarnation() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(const WorkerConfig& config) {
  const std::string log_dir = config.state_dir + "/logs";
  if (absl::Status s = MakePrivateDir(log_dir, 0750); !s.ok()) return s;
  std::unique_ptr<WorkerServer> server(new WorkerServer);

  // NVML serves both the GPUs offered to ranks and their metrics.
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Load(config.nvml_library);
  std::string why_no_gpu = nvml.ok() ? "" : std::string(nvml.status().message());
  std::vector<v1::Gpu> gpus;
  if (nvml.ok()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    gpus = DiscoverGpus(**nvml, visible ? std::optional<std::string>(visible) : std::nullopt,
                        &why_no_gpu);
  }
  if (gpus.empty()) spdlog::info("no GPU: {}", why_no_gpu);
  v1::RegisterWorker identity;
  identity.set_worker_id(config.worker_id);
  identity.set_address(config.advertise_address);
  identity.set_hostname(Hostname());
  identity.set_incarnation(NewIncarnation());
  identity.set_slots(config.slots > 0 ? config.slots
                                      : std::max<int>(1, static_cast<int>(gpus.size())));
  for (auto& gpu : gpus) *identity.add_gpus() = gpu;
  if (!gpus.empty() && identity.slots() != static_cast<int>(gpus.size())) {
    spdlog::warn("--slots {} ignored: a GPU worker has one slot per GPU ({})", identity.slots(),
                 gpus.size());
    identity.set_slots(static_cast<int>(gpus.size()));
  }
  *identity.mutable_labels() = {config.labels.begin(), config.labels.end()};
  identity.set_cpus(config.cpus > 0 ? config.cpus : MachineCpus());
  identity.set_memory_mb(config.memory_mb > 0 ? config.memory_mb : MachineMemoryMb());

  RankSupervisorOptions supervisor_options;
  supervisor_options.log_dir = log_dir;
  // `import ringmaster` in a rank's program: report() and the DDP hook.
  absl::StatusOr<std::string> python = InstallPythonPackage(config.state_dir + "/python");
  if (!python.ok()) return python.status();
  supervisor_options.base_env["PYTHONPATH"] = *python;
  supervisor_options.jobs_dir = config.state_dir + "/jobs";
  supervisor_options.gpus = gpus;
  supervisor_options.trainer_program = config.trainer_program;
  // Ranks report progress to this worker and bind collectives on its host.
  supervisor_options.base_env["RINGMASTER_WORKER_ADDRESS"] = config.advertise_address;
  supervisor_options.base_env["RINGMASTER_WORKER_ID"] = config.worker_id;
  // Ranks check this worker's agent and the coordinator against the CA.
  if (config.tls) supervisor_options.base_env["RINGMASTER_TLS_CA"] = config.tls->ca_pem;
  supervisor_options.base_env["RINGMASTER_HOST"] = HostOfAddress(config.advertise_address);
  // The sanitizers' options too, so that ranks of a sanitizer build of the
  // trainer run as the worker does.
  for (const char* name : {"PATH", "HOME", "LANG", "TMPDIR", "USER", "ASAN_OPTIONS", "LSAN_OPTIONS",
                           "TSAN_OPTIONS", "UBSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name)) supervisor_options.base_env[name] = value;
  }
  if (supervisor_options.base_env.count("PATH") == 0) {
    supervisor_options.base_env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  }
  ASSIGN_OR_RETURN(
      supervisor_options.identities,
      ChooseRankIdentities(config.rank_user, config.rank_uid_range, supervisor_options.jobs_dir));
  const RankIdentities& identities = supervisor_options.identities;
  const std::optional<RunAs>& shared = identities.shared();
  if (shared) {
    supervisor_options.base_env["HOME"] = shared->home;
    supervisor_options.base_env["USER"] = shared->name.substr(0, shared->name.find(':'));
  }
  if (identities.per_job()) {
    supervisor_options.hide_other_jobs_processes = CanHideOtherUsersProcesses();
    if (!supervisor_options.hide_other_jobs_processes) {
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
      return absl::FailedPreconditionError(
          absl::StrCat("cannot set the mode of ", config.state_dir, ": ", strerror(errno)));
    }
  }
  server->code_ = std::make_unique<JobCode>(
      config.state_dir + "/jobs", UnpackLimits{config.max_code_bytes},
      CoordinatorCodeFetch(CoordinatorChannel(config.coordinator_address, config.tls),
                           config.token));
  supervisor_options.code = server->code_.get();
  WorkerServer* self = server.get();
  // Kills what an earlier worker of this id left before anything registers.
  server->launcher_ = std::make_unique<PosixProcessLauncher>(
      RankCgroups::NameFor(config.worker_id, config.state_dir));
  server->supervisor_ = std::make_unique<RankSupervisor>(
      server->launcher_.get(), supervisor_options,
      RankSupervisor::Callbacks{[self](const v1::RankStarted& started) {
                                  v1::WorkerMessage m;
                                  *m.mutable_rank_started() = started;
                                  self->link_->Send(m);
                                },
                                [self](const v1::RankExited& exited) {
                                  v1::WorkerMessage m;
                                  *m.mutable_rank_exited() = exited;
                                  // The final report travels with the exit, so it cannot miss the
                                  // job's last transition.
                                  if (auto last = self->progress_.Forget(exited.rank())) {
                                    *m.mutable_rank_exited()->mutable_last_progress() = *last;
                                  }
                                  self->link_->Send(m);
                                }});

  CoordinatorLinkOptions link_options;
  link_options.coordinator_address = config.coordinator_address;
  link_options.token = config.token;
  link_options.tls = config.tls;
  link_options.identity = identity;
  server->link_ = std::make_unique<CoordinatorLink>(
      link_options,
      CoordinatorLink::Hooks{[self](const v1::CoordinatorMessage& command) {
                               if (command.has_start_rank()) {
                                 self->supervisor_->Start(command.start_rank());
                               } else if (command.has_stop_job()) {
                                 const auto& stop = command.stop_job();
                                 self->supervisor_->StopJob(stop.job_id(), stop.attempt(),
                                                            absl::Milliseconds(stop.grace_ms()));
                               } else if (command.has_delete_job_logs()) {
                                 self->supervisor_->DeleteLogs(command.delete_job_logs().job_id());
                               }
                             },
                             [self] { return self->RunningRanks(); },
                             [self] { return self->progress_.TakeChanged(); },
                             [self](v1::Heartbeat* beat) { self->metrics_->FillUsage(beat); },
                             [self](const v1::Registered& registered) {
                               self->access_->SetAgentCredential(registered.agent_credential());
                             },
                             [self] { return self->supervisor_->LoggedJobs(); }});

  server->metrics_ = std::make_unique<WorkerMetrics>(
      &server->registry_, config.worker_id, nvml.ok() ? *std::move(nvml) : nullptr,
      [self] {
        std::vector<RankProcess> out;
        for (const auto& p : self->supervisor_->RunningProcesses()) {
          out.push_back({p.rank, p.pid, p.slot});
        }
        return out;
      },
      RealClock::Get(), config.metrics_retention);
  // A worker with a credential of its own belongs to a cluster that checks
  // callers; so does its agent.
  server->access_ = std::make_unique<AgentAccess>(
      !config.token.empty() || config.tls.has_value(),
      [self](const std::string& token) { return self->supervisor_->RankOfJobToken(token); });
  server->agent_ = std::make_unique<AgentServiceImpl>(
      server->supervisor_.get(), &server->progress_,
      [self](const v1::RankProgress& p) { self->metrics_->OnProgress(p); }, server->access_.get());
  if (!config.metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
        MetricsServer::Start(config.metrics_address, &server->registry_);
    if (!metrics_server.ok()) return metrics_server.status();
    server->metrics_server_ = *std::move(metrics_server);
  }
  server->tooling_ = std::make_unique<ServerTooling>(
      std::vector<std::string>{v1::WorkerAgentService::service_full_name()});
  grpc::ServerBuilder builder;
  server->tooling_->AddTo(builder);
  int port = 0;
  builder.AddListeningPort(config.listen_address, ServerCredentials(config.tls), &port);
  // A port another server holds fails to bind here, rather than shares it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(server->agent_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(ParseErrorInterceptor({v1::WorkerAgentService::service_full_name()}));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen_address));
  }
  server->tooling_->Serving(server->server_.get(), true);
  server->link_thread_ = std::thread([self] {
    absl::Status status = self->link_->Run();
    if (!status.ok()) {
      spdlog::critical("{}", std::string(status.message()));
      MutexLock lock(&self->mu_);
      self->fatal_ = status;
      kill(getpid(), SIGTERM);  // wakes main's wait for a termination signal
    }
  });
  spdlog::info("worker {} serving on {} with {} slots; coordinator {}", config.worker_id,
               config.listen_address, identity.slots(), config.coordinator_address);
  return server;
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
