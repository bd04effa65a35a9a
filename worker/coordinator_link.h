// The worker's end of its Connect stream to the coordinator: registers,
// heartbeats, relays rank events, receives commands, and reconnects with
// back-off when the coordinator goes away.
#ifndef RINGMASTER_WORKER_COORDINATOR_LINK_H_
#define RINGMASTER_WORKER_COORDINATOR_LINK_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

struct CoordinatorLinkOptions {
  std::string coordinator_address;
  std::string token;  // sent as "authorization: Bearer"; empty: none
  v1::RegisterWorker identity;  // id, address, hostname, slots, gpus
  absl::Duration reconnect_initial = absl::Milliseconds(200);
  absl::Duration reconnect_max = absl::Seconds(5);
};

// Thread-safe. Run() owns the stream on its thread; Send() may be called
// from any thread. Commands are delivered on the Run() thread.
class CoordinatorLink {
 public:
  struct Hooks {
    std::function<void(const v1::CoordinatorMessage&)> on_command;
    std::function<std::vector<v1::RankRef>()> running_ranks;
    std::function<std::vector<v1::RankProgress>()> progress;  // may be empty
    std::function<void(v1::Heartbeat*)> usage;                 // may be empty
  };

  CoordinatorLink(CoordinatorLinkOptions options, Hooks hooks);

  // Connects and serves until Shutdown.
  void Run();
  void Shutdown();

  // Rank events; kept and sent after reconnecting when the stream is down.
  void Send(const v1::WorkerMessage& message);

 private:
  // One connection's lifetime; returns when the stream ends.
  void Serve(v1::WorkerService::Stub* stub);
  void HeartbeatLoop();
  bool WriteLocked(const v1::WorkerMessage& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorLinkOptions options_;
  const Hooks hooks_;

  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream_
      ABSL_GUARDED_BY(mu_) = nullptr;
  std::deque<v1::WorkerMessage> unsent_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  bool heartbeat_stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_COORDINATOR_LINK_H_
