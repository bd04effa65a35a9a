#include "coordinator/api/elected_coordinator.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster {

std::unique_ptr<ElectedCoordinator> ElectedCoordinator::Start(CoordinatorConfig config,
                                                              std::unique_ptr<StoreEngine> engine,
                                                              ElectionOptions options) {
  // A leader whose store is fenced (another leads) steps down too.
  config.manager.on_store_lost = [step_down = options.step_down](const absl::Status&) {
    step_down();
  };
  std::unique_ptr<ElectedCoordinator> coordinator(
      new ElectedCoordinator(std::move(config), std::move(engine), std::move(options)));
  coordinator->thread_ = std::thread([c = coordinator.get()] { c->Run(); });
  return coordinator;
}

template <typename T>
std::unique_ptr<T> ElectedCoordinator::Retry(
    const char* what, const std::function<absl::StatusOr<std::unique_ptr<T>>()>& start) {
  std::string said;
  do {
    absl::StatusOr<std::unique_ptr<T>> started = start();
    if (started.ok()) return *std::move(started);
    if (started.status().ToString() != said) {
      said = started.status().ToString();
      spdlog::error("{}: {}; trying again each second", what, said);
      MutexLock lock(&mu_);
      store_error_ = std::string(started.status().message());
    }
  } while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(1)));
  return nullptr;
}

std::unique_ptr<StorelessServer> ElectedCoordinator::ServeStoreless() {
  absl::StatusOr<std::unique_ptr<StorelessServer>> server = StorelessServer::Start(config_, [this] {
    MutexLock lock(&mu_);
    return store_error_.empty() ? std::string("connecting") : store_error_;
  });
  if (!server.ok()) {
    spdlog::warn("cannot say on the port that the store is out of reach: {}",
                 server.status().ToString());
    return nullptr;
  }
  PinPort((*server)->port());
  return *std::move(server);
}

void ElectedCoordinator::PinPort(int port) {
  // Port 0 is chosen once: every role serves where the first one did.
  if (absl::EndsWith(config_.listen_address, ":0")) {
    config_.listen_address.resize(config_.listen_address.size() - 1);
    absl::StrAppend(&config_.listen_address, port);
  }
}

void ElectedCoordinator::Run() {
  // Until the store answers, the port says so.
  std::unique_ptr<StorelessServer> storeless = ServeStoreless();
  leadership_ = Retry<Leadership>(
      "cannot join the election", [this]() -> absl::StatusOr<std::unique_ptr<Leadership>> {
        ASSIGN_OR_RETURN(
            std::unique_ptr<Lease> lease,
            engine_->OpenLease({options_.id, options_.address, options_.lease_timeout}));
        return Leadership::Start(std::move(lease), options_.lease_timeout);
      });
  if (leadership_ == nullptr) return;
  std::unique_ptr<StandbyServer> standby = Retry<StandbyServer>("cannot serve as a standby", [&]() {
    storeless.reset();  // frees the port
    absl::StatusOr<std::unique_ptr<StandbyServer>> started =
        StandbyServer::Start(config_, *engine_, leadership_.get());
    if (!started.ok()) storeless = ServeStoreless();
    return started;
  });
  if (standby == nullptr) return;
  PinPort(standby->port());
  {
    MutexLock lock(&mu_);
    standby_ = std::move(standby);
  }
  Lead();
}

void ElectedCoordinator::Lead() {
  if (!leadership_->WaitToLead(&stop_)) return;
  spdlog::info("leading at term {}", leadership_->state().term);
  {
    MutexLock lock(&mu_);
    standby_.reset();  // frees the port
  }
  config_.lease_term = leadership_->state().term;
  const absl::Status queues = ReadQueuesToLead();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(config_);
  if (!server.ok()) {
    spdlog::error("cannot lead: {}", server.status().ToString());
    options_.step_down();
    return;
  }
  if (!queues.ok()) (*server)->SetQueues(queues);  // its metric says so
  {
    MutexLock lock(&mu_);
    leader_ = *std::move(server);
    // A reading that came while the server started.
    if (unapplied_) leader_->SetQueues(*std::exchange(unapplied_, std::nullopt));
  }
  if (leadership_->WaitWhileLeading(&stop_)) options_.step_down();
}

absl::Status ElectedCoordinator::ReadQueuesToLead() {
  if (options_.queues_file.empty()) return absl::OkStatus();
  absl::StatusOr<QueueConfig> read = LoadQueueConfig(options_.queues_file);
  MutexLock lock(&mu_);
  unapplied_.reset();  // the file as it is now is what counts
  if (read.ok()) {
    queues_ = *read;
  } else {
    spdlog::error("leading with the queues last taken: {}", std::string(read.status().message()));
  }
  if (queues_) config_.manager.queues = *queues_;
  return read.status();
}

void ElectedCoordinator::SetQueues(const absl::StatusOr<QueueConfig>& queues) {
  MutexLock lock(&mu_);
  if (queues.ok()) queues_ = *queues;
  if (leader_) {
    leader_->SetQueues(queues);
  } else {
    unapplied_ = queues;
  }
}

ElectedCoordinator::~ElectedCoordinator() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  {
    MutexLock lock(&mu_);
    leader_.reset();
    standby_.reset();
  }
  leadership_.reset();  // releases the lease once nothing more is written
}

}  // namespace ringmaster
