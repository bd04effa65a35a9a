// A coordinator among several that share one PostgreSQL: a standby
// (StandbyServer) until it wins the lease, then the leader
// (CoordinatorServer, its writes fenced by its term) until it stops
// leading. Then it steps down by restarting in place (`step_down`, an
// exec of its own binary): its worker streams close, nothing of the
// leader's memory survives to act, and it comes back as a standby. It
// never stops a rank because it lost the lease: the workers keep their
// ranks and report them to the next leader.
#ifndef RINGMASTER_COORDINATOR_API_ELECTED_COORDINATOR_H_
#define RINGMASTER_COORDINATOR_API_ELECTED_COORDINATOR_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "coordinator/api/coordinator_server.h"
#include "coordinator/ha/leadership.h"
#include "coordinator/store/store_engine.h"

namespace ringmaster {

struct ElectionOptions {
  std::string id;       // unique among the coordinators
  std::string address;  // where clients reach this one
  absl::Duration lease_timeout = absl::Seconds(5);
  // Restarts the process as a standby; does not return.
  std::function<void()> step_down;
  // --queues: read again when this coordinator starts to lead, so a
  // standby leads with the file as it is then.
  std::string queues_file;
};

class ElectedCoordinator {
 public:
  // Joins the election and serves as a standby, on a thread of its own:
  // until the database answers (and the port is free) it tries again each
  // second, its port saying so (StorelessServer).
  // `engine` is the shared store's.
  static std::unique_ptr<ElectedCoordinator> Start(CoordinatorConfig config,
                                                   std::unique_ptr<StoreEngine> engine,
                                                   ElectionOptions options);
  // A leader shuts down and releases its lease, so a standby takes over
  // without waiting for it to run out.
  ~ElectedCoordinator();

  // The queues file read again (SIGHUP, or its bytes changed): the
  // leader's, or the one a standby starts to lead with when the file
  // cannot be read then.
  void SetQueues(const absl::StatusOr<QueueConfig>& queues);

 private:
  ElectedCoordinator(CoordinatorConfig config, std::unique_ptr<StoreEngine> engine,
                     ElectionOptions options)
      : config_(std::move(config)), engine_(std::move(engine)), options_(std::move(options)) {}
  void Run();
  // Retries `start` each second until it succeeds or the coordinator stops.
  template <typename T>
  std::unique_ptr<T> Retry(const char* what,
                           const std::function<absl::StatusOr<std::unique_ptr<T>>()>& start);
  // Serves on the port that the store is out of reach (StorelessServer);
  // null when it cannot.
  std::unique_ptr<StorelessServer> ServeStoreless();
  // With port 0, the port chosen first is kept for every role.
  void PinPort(int port);
  // Waits for the lease, then leads until it is lost (and steps down) or
  // the coordinator stops.
  void Lead();
  // The queues to lead with: the file as it is now, else the last taken
  // (with why the file was refused).
  absl::Status ReadQueuesToLead();

  CoordinatorConfig config_;  // the role thread's
  const std::unique_ptr<StoreEngine> engine_;
  const ElectionOptions options_;
  std::unique_ptr<Leadership> leadership_;  // made by the role thread
  Notification stop_;
  Mutex mu_;
  std::unique_ptr<StandbyServer> standby_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<CoordinatorServer> leader_ ABSL_GUARDED_BY(mu_);
  std::string store_error_ ABSL_GUARDED_BY(mu_);  // the last, while it cannot be reached
  // The last queues taken from --queues; nullopt: those it started with.
  std::optional<QueueConfig> queues_ ABSL_GUARDED_BY(mu_);
  // A reading of --queues no leader has been given yet.
  std::optional<absl::StatusOr<QueueConfig>> unapplied_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_ELECTED_COORDINATOR_H_
