// ringmaster-coordinator: the job queue, scheduler, rendezvous store and
// health checker of a Ringmaster cluster.
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "common/daemon_flags.h"
#include "common/signals.h"
#include "coordinator/coordinator_server.h"

int main(int argc, char** argv) {
  ringmaster::CoordinatorConfig config;
  ringmaster::DaemonFlags daemon(7070, 7071);
  std::string checkpoint_dir;
  int64_t heartbeat_timeout_ms = 10000;
  int64_t stop_grace_ms = 10000;
  config.state_dir = "/var/lib/ringmaster";

  CLI::App app{"Ringmaster coordinator: queues, schedules and supervises jobs"};
  daemon.AddTo(app,
               "host:port ranks use to reach this coordinator "
               "(default: the bind address, or this host's name)");
  app.add_option("--state-dir", config.state_dir, "holds coordinator.db")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", checkpoint_dir,
                 "checkpoint root given to ranks (default: <state-dir>/checkpoints)");
  app.add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms,
                 "a worker silent this long is lost")
      ->capture_default_str();
  if (const char* token = std::getenv("RINGMASTER_TOKEN"); token && *token) config.token = token;
  app.add_option("--token", config.token,
                 "require this bearer token of every caller (env RINGMASTER_TOKEN); ranks get "
                 "it for the rendezvous store");
  app.add_option("--stop-grace-ms", stop_grace_ms,
                 "SIGTERM to SIGKILL grace when stopping ranks")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<ringmaster::DaemonAddresses> addresses = daemon.Start("coordinator");
  if (!addresses.ok()) {
    spdlog::critical("{}", addresses.status().ToString());
    return 1;
  }
  config.listen_address = addresses->listen;
  config.metrics_address = addresses->metrics;
  config.manager.rank_env.coordinator_address = addresses->advertise;
  config.manager.rank_env.token = config.token;
  config.manager.heartbeat_timeout = absl::Milliseconds(heartbeat_timeout_ms);
  config.manager.stop_grace = absl::Milliseconds(stop_grace_ms);
  config.manager.rank_env.checkpoint_dir =
      checkpoint_dir.empty() ? config.state_dir + "/checkpoints" : checkpoint_dir;
  auto server = ringmaster::CoordinatorServer::Start(config);
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  spdlog::info("ready on port {}", (*server)->port());
  int signal = ringmaster::WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", signal);
  (*server)->Shutdown();
  return 0;
}
