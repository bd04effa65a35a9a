#include "coordinator/api/coordinator_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_metrics.h"
#include "common/parse_errors.h"
#include "common/private_dir.h"
#include "common/status_macros.h"
#include "coordinator/store/store_factory.h"

namespace ringmaster {

constexpr absl::Duration kTickInterval = absl::Milliseconds(50);

namespace {

// The API's services, which the leader and a standby both answer for.
std::vector<std::string> ApiServices() {
  return {v1::JobService::service_full_name(), v1::ClusterService::service_full_name(),
          v1::WorkerService::service_full_name(), v1::RendezvousService::service_full_name()};
}

// What both the leader's and a standby's server are built with: the
// port, the largest message, keepalive.
void Configure(const CoordinatorConfig& config, grpc::ServerBuilder& builder, int* port) {
  builder.AddListeningPort(config.listen_address, ServerCredentials(config.tls), port);
  // A port another server holds fails to bind here, rather than shares it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A request may carry a spec or a rendezvous value at their limits (and a
  // worker's registration its unacknowledged events: gRPC's 4 MiB at least).
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::max({int64_t{4} << 20, config.manager.spec_limits.max_spec_bytes + (64 << 10),
                config.rendezvous.max_value_bytes + (64 << 10)})));
  // Workers keep their stream open; keepalive finds dead peers.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  // Workers that follow a leader among several ping every 2 s.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
}

// Marks the server's health, and the leader's service when it leads.
void SetHealth(const ServerTooling& tooling, grpc::Server* server, bool serving, bool leader) {
  tooling.Serving(server, serving);
  if (grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService()) {
    health->SetServingStatus(kLeaderHealthService, serving && leader);
  }
}

void ExportLeader(metrics::Registry* registry, bool leader) {
  registry
      ->AddGauge("ringmaster_coordinator_leader",
                 "1 on the coordinator that leads, 0 on a standby.")
      .Add({})
      .Set(leader ? 1 : 0);
}

}  // namespace

absl::StatusOr<std::string> LoadCredentialKey(const std::string& state_dir, StoreEngine& store) {
  // Job specs and their environments live here: the owner's only.
  RETURN_IF_ERROR(MakePrivateDir(state_dir));
  ASSIGN_OR_RETURN(std::string local, LoadOrCreateKey(state_dir + "/credential.key"));
  if (store.shared()) return store.SharedCredentialKey(local);
  return local;
}

absl::Status RotateCredentialKey(const std::string& state_dir, StoreEngine& store) {
  RETURN_IF_ERROR(LoadCredentialKey(state_dir, store).status());  // there is one to rotate
  const std::string current = state_dir + "/credential.key";
  const std::string next = current + ".next";
  unlink(next.c_str());  // a rotation cut short
  ASSIGN_OR_RETURN(std::string key, LoadOrCreateKey(next));
  // The coordinator's, not root's when an operator rotates with sudo.
  struct stat dir {};
  if (stat(state_dir.c_str(), &dir) != 0 || chown(next.c_str(), dir.st_uid, dir.st_gid) != 0) {
    unlink(next.c_str());
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot give the new key ", next, " to the owner of ", state_dir, ": ", strerror(errno)));
  }
  if (store.shared()) RETURN_IF_ERROR(store.RotateSharedCredentialKey(key));
  // One rename: credential.key is always there, old or new.
  if (rename(next.c_str(), current.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot put the new key in ", current, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorConfig& config) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer);
  ASSIGN_OR_RETURN(server->engine_, OpenStoreEngine(config.store, config.state_dir));
  ASSIGN_OR_RETURN(std::string key, LoadCredentialKey(config.state_dir, *server->engine_));
  server->access_ = std::make_unique<AccessPolicy>(
      AccessOptions{config.admin_token, key, config.tls.has_value()});
  // The jobs first (recovered from the store), then the services that
  // reach them, then the port: nothing is served before it is whole.
  RETURN_IF_ERROR(server->InitJobs(config));
  RETURN_IF_ERROR(server->InitServices(config));
  RETURN_IF_ERROR(server->Serve(config));
  server->ticker_ = std::thread([s = server.get()] { s->TickLoop(); });
  server->health_ = std::thread([s = server.get()] { s->HealthLoop(); });
  spdlog::info("coordinator serving {} on port {}, state in {}", config.tls ? "TLS" : "plaintext",
               server->port_, config.state_dir);
  if (server->access_->open()) {
    spdlog::warn("no admin token and no TLS: every caller may do everything");
  }
  return server;
}

absl::Status CoordinatorServer::InitJobs(const CoordinatorConfig& config) {
  if (engine_->shared()) spdlog::info("job store: {}", engine_->label());
  ASSIGN_OR_RETURN(store_, engine_->OpenJobStore(config.lease_term));
  const Clock* clock = RealClock::Get();
  metrics_ = std::make_unique<CoordinatorMetrics>(&registry_, clock, config.metrics_retention);
  JobManagerOptions manager_options = config.manager;
  manager_options.rank_env.signer = &access_->signer();
  manager_options.watchers_in_background = true;
  manager_options.on_transition = [m = metrics_.get()](const v1::Job& before,
                                                       const v1::StateChange& change) {
    m->OnTransition(before, change);
  };
  ASSIGN_OR_RETURN(rendezvous_journal_, engine_->OpenRendezvousJournal(config.lease_term));
  rendezvous_ =
      std::make_unique<RendezvousStore>(clock, config.rendezvous, rendezvous_journal_.get());
  // The keys of attempts that were starting under the last leader.
  RETURN_IF_ERROR(rendezvous_->Restore());
  membership_ = std::make_unique<WorkerMembership>(clock, config.membership);
  manager_ = std::make_unique<JobManager>(store_.get(), rendezvous_.get(), membership_.get(), clock,
                                          manager_options);
  JobManager* manager = manager_.get();
  metrics_->SetSources(
      [manager] { return manager->CountByState(); }, [manager] { return manager->ListWorkers(); },
      [manager] {
        std::vector<QueueGauges> gauges;
        const v1::ListQueuesResponse queues = manager->ListQueues();
        for (const v1::Queue& q : queues.queues()) {
          gauges.push_back({q.name(), q.in_use().slots(), q.quota().slots(), q.pending_jobs()});
        }
        return gauges;
      });
  metrics_->SetSlowdownSource([manager] { return manager->Slowdowns(); });
  metrics_->SetGoodputSource([manager] { return manager->Goodputs(); });
  metrics_->SetDomainSource([manager] { return manager->DomainGauges(); });
  RETURN_IF_ERROR(manager_->Recover());
  rendezvous_->EndRestore();
  return absl::OkStatus();
}

absl::Status CoordinatorServer::InitServices(const CoordinatorConfig& config) {
  const Clock* clock = RealClock::Get();
  const AccessPolicy* access = access_.get();
  // Workers' agents are checked against the CA; the coordinator shows them
  // its agent credential, not a certificate.
  const Tls agent_tls = CaOnly(config.tls ? config.tls->ca_pem : "");
  logs_ = std::make_unique<LogRelay>(manager_.get(), &access->signer(), agent_tls,
                                     config.max_log_line_bytes);
  CodeStoreOptions code{config.state_dir + "/code"};
  code.max_archive_bytes = config.max_upload_bytes;
  shared_code_ = engine_->OpenCodeArchives(config.lease_term);
  code.shared = shared_code_.get();
  code_ = std::make_unique<CodeStore>(code, clock);
  RETURN_IF_ERROR(code_->Init());
  uploads_ = std::make_unique<CodeUploads>(code_.get(), config.upload_idle_timeout);
  job_service_ = std::make_unique<JobServiceImpl>(manager_.get(), logs_.get(), code_.get(),
                                                  uploads_.get(), access);
  cluster_service_ = std::make_unique<ClusterServiceImpl>(manager_.get(), access);
  worker_service_ = std::make_unique<WorkerServiceImpl>(
      manager_.get(), membership_.get(), code_.get(), access, config.max_stream_queue);
  rendezvous_service_ = std::make_unique<RendezvousServiceImpl>(
      rendezvous_.get(), clock, access,
      [m = manager_.get()](const ScopeId& scope, int generation, int rank, const std::string& why) {
        m->OnPeerLost(scope.job_id, scope.attempt, generation, rank, why);
      });
  return absl::OkStatus();
}

absl::Status CoordinatorServer::Serve(const CoordinatorConfig& config) {
  const std::vector<std::string> services = ApiServices();
  tooling_ = std::make_unique<ServerTooling>(services);
  grpc::ServerBuilder builder;
  tooling_->AddTo(builder);
  Configure(config, builder, &port_);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(cluster_service_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(rendezvous_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(RpcLatencyInterceptor(&registry_));
  interceptors.push_back(ParseErrorInterceptor(services));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen_address));
  }
  SetHealth(*tooling_, server_.get(), true, true);
  ExportLeader(&registry_, true);
  if (!config.metrics_address.empty()) {
    // /ready: the leader, while its store answers.
    ASSIGN_OR_RETURN(metrics_server_,
                     MetricsServer::Start(config.metrics_address, &registry_,
                                          [store = store_.get()] { return store->Reachable(); }));
  }
  if (!config.http_address.empty()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    HttpGatewayOptions http{config.http_address, config.tls,
                            config.manager.spec_limits.max_spec_bytes + (64 << 10),
                            access_->open() ? nullptr : &access_->signer()};
    ASSIGN_OR_RETURN(http_, HttpGateway::Start(http, server_->InProcessChannel(args)));
    cluster_service_->set_http_port(http_->port());
    spdlog::info("HTTP/JSON API on {}{}", config.tls ? "https://" : "http://", config.http_address);
  }
  return absl::OkStatus();
}

void CoordinatorServer::TickLoop() {
  absl::Time next_code_prune = absl::Now();
  while (!stop_.WaitForNotificationWithTimeout(kTickInterval)) {
    rendezvous_->ExpireWaiters();
    uploads_->EndIdle(absl::Now());
    manager_->Tick();
    if (absl::Now() >= next_code_prune) {
      next_code_prune = absl::Now() + absl::Minutes(1);
      if (int removed = code_->Prune(manager_->CodeInUse()); removed > 0) {
        spdlog::info("removed {} unused code archive(s)", removed);
      }
    }
  }
}

void CoordinatorServer::HealthLoop() {
  bool serving = true;
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
    const bool reachable = store_->Reachable();
    if (reachable == serving) continue;
    serving = reachable;
    SetHealth(*tooling_, server_.get(), serving, true);
    if (serving) {
      spdlog::info("the job store answers again: SERVING");
    } else {
      spdlog::error("the job store cannot be reached: NOT_SERVING until it is back");
    }
  }
}

void CoordinatorServer::Wait() { stop_.WaitForNotification(); }

void CoordinatorServer::SetQueues(const absl::StatusOr<QueueConfig>& queues) {
  metrics_->SetQueuesReloaded(queues.ok());
  if (!queues.ok()) {
    spdlog::error("--queues: keeping the queues as they were: {}",
                  std::string(queues.status().message()));
    return;
  }
  spdlog::info("--queues: {} queues read again", queues->queues.size());
  manager_->SetQueues(*queues);
}

void CoordinatorServer::Shutdown() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

CoordinatorServer::~CoordinatorServer() {
  Shutdown();
  if (ticker_.joinable()) ticker_.join();
  if (health_.joinable()) health_.join();
  metrics_server_.reset();  // its scrapes read the manager
  http_.reset();            // its calls are the server's
  // The server's shutdown waits for every call to finish: a rendezvous Wait
  // would otherwise hold it until its own deadline, up to an hour away.
  rendezvous_->Close();
  if (server_) SetHealth(*tooling_, server_.get(), false, false);
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

absl::StatusOr<std::unique_ptr<StandbyServer>> StandbyServer::Start(const CoordinatorConfig& config,
                                                                    StoreEngine& engine,
                                                                    const Leadership* leadership) {
  ASSIGN_OR_RETURN(std::string key, LoadCredentialKey(config.state_dir, engine));
  std::unique_ptr<StandbyServer> server(new StandbyServer);
  server->access_ = std::make_unique<AccessPolicy>(
      AccessOptions{config.admin_token, key, config.tls.has_value()});
  ASSIGN_OR_RETURN(server->store_, engine.OpenJobReader());
  server->jobs_ = std::make_unique<StoredJobLogIndex>(server->store_.get());
  server->logs_ = std::make_unique<LogRelay>(server->jobs_.get(), &server->access_->signer(),
                                             CaOnly(config.tls ? config.tls->ca_pem : ""),
                                             config.max_log_line_bytes);
  server->log_service_ =
      std::make_unique<StandbyLogService>(server->logs_.get(), server->access_.get());
  server->service_ =
      std::make_unique<StandbyService>(server->store_.get(), server->access_.get(),
                                       [leadership] { return leadership->state().leader_address; });
  RETURN_IF_ERROR(server->port_.Start(config, /*serving=*/true, [&](grpc::ServerBuilder& builder) {
    builder.RegisterService(server->log_service_.get());
    builder.RegisterCallbackGenericService(server->service_.get());
  }));
  spdlog::info("standby on port {}: reads served, the rest sent to the leader",
               server->port_.port());
  return server;
}

absl::StatusOr<std::unique_ptr<StorelessServer>> StorelessServer::Start(
    const CoordinatorConfig& config, std::function<std::string()> why) {
  std::unique_ptr<StorelessServer> server(new StorelessServer);
  server->service_ = std::make_unique<RefusingService>([why = std::move(why)] {
    return absl::UnavailableError(
        absl::StrCat("this coordinator cannot reach its job store yet: ", why()));
  });
  RETURN_IF_ERROR(server->port_.Start(config, /*serving=*/false, [&](grpc::ServerBuilder& builder) {
    builder.RegisterCallbackGenericService(server->service_.get());
  }));
  return server;
}

absl::Status FollowerPort::Start(const CoordinatorConfig& config, bool serving,
                                 const std::function<void(grpc::ServerBuilder&)>& add_services) {
  tooling_ = std::make_unique<ServerTooling>(ApiServices());
  grpc::ServerBuilder builder;
  tooling_->AddTo(builder);
  Configure(config, builder, &port_);
  add_services(builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen_address));
  }
  SetHealth(*tooling_, server_.get(), serving, /*leader=*/false);
  ExportLeader(&registry_, false);
  if (!config.metrics_address.empty()) {
    ASSIGN_OR_RETURN(metrics_server_, MetricsServer::Start(config.metrics_address, &registry_,
                                                           [] { return false; }));
  }
  return absl::OkStatus();
}

FollowerPort::~FollowerPort() {
  metrics_server_.reset();
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

}  // namespace ringmaster
