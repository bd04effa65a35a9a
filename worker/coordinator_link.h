// The worker's end of its Connect stream to the coordinator: registers,
// heartbeats, relays rank events until they are acknowledged, receives
// commands, and reconnects with back-off when the coordinator goes away.
#ifndef RINGMASTER_WORKER_COORDINATOR_LINK_H_
#define RINGMASTER_WORKER_COORDINATOR_LINK_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "proto/worker.grpc.pb.h"
#include "worker/event_outbox.h"

namespace ringmaster {

struct CoordinatorLinkOptions {
  std::string coordinator_address;
  std::string token;            // sent as "authorization: Bearer"; empty: none
  Tls tls;                      // this worker's certificate, shown to the coordinator
  v1::RegisterWorker identity;  // id, address, hostname, slots, gpus, incarnation
  absl::Duration reconnect_initial = absl::Milliseconds(200);
  absl::Duration reconnect_max = absl::Seconds(5);
  // Tests only: called while an event is numbered but not yet queued.
  std::function<void()> on_numbered;
};

// Thread-safe. Run() owns the stream on its thread; Send() may be called
// from any thread. Commands are delivered on the Run() thread. Writes go
// through a bounded queue to a writer thread, so no caller waits for the
// network under the mutex: at most one heartbeat is queued (a newer one
// replaces it), and past kMaxQueuedEvents rank events the stream is
// dropped and made again (the events travel in the registration).
class CoordinatorLink {
 public:
  static constexpr size_t kMaxQueuedEvents = 1000;

  struct Hooks {
    std::function<void(const v1::CoordinatorMessage&)> on_command;
    // Rank processes alive now, with their output and report counters.
    std::function<std::vector<v1::RunningRank>()> running_ranks;
    std::function<std::vector<v1::RankProgress>()> progress;  // may be empty
    std::function<void(v1::Heartbeat*)> usage;                // may be empty
    std::function<void(const v1::Registered&)> registered;    // may be empty
    std::function<std::vector<std::string>()> logged_jobs;    // may be empty
  };

  CoordinatorLink(CoordinatorLinkOptions options, Hooks hooks);

  // Connects and serves until Shutdown. Returns early, with the refusal,
  // when the coordinator refuses the first registration (another worker
  // holds the id); a refusal after that is retried.
  absl::Status Run();
  void Shutdown();

  // A rank event: numbered, kept until acknowledged, sent now when the
  // stream is up and again inside the next registration otherwise. Events
  // are written in the order of their numbers, whatever the threads.
  void Send(v1::WorkerMessage event);

 private:
  // One connection's lifetime; returns how the stream ended.
  grpc::Status Serve(v1::WorkerService::Stub* stub, bool* registered);
  void HeartbeatLoop();
  // A coordinator asking again for a rank's exit.
  void AnswerQuery(const v1::QueryRank& query);
  // Writes what is queued, in order, until the stream ends.
  void WriteLoop(grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream);
  // Queues a message for the writer; false when there is no stream.
  bool QueueLocked(v1::WorkerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WriterHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !writable_ || !queued_.empty();
  }

  const CoordinatorLinkOptions options_;
  const Hooks hooks_;

  Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool writable_ ABSL_GUARDED_BY(mu_) = false;  // a stream is up and takes writes
  std::deque<v1::WorkerMessage> queued_ ABSL_GUARDED_BY(mu_);
  EventOutbox outbox_;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  bool heartbeat_stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_COORDINATOR_LINK_H_
