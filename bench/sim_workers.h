// Simulated workers for the coordinator's scale benchmark: each holds a real
// Connect stream to the coordinator, registers, heartbeats, and answers
// StartRank with RankStarted and, after a set run time, RankExited (code
// 0), as a worker whose ranks succeed would. No process is started.
#ifndef RINGMASTER_BENCH_SIM_WORKERS_H_
#define RINGMASTER_BENCH_SIM_WORKERS_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

struct FleetCounters {
  std::atomic<int> registered{0};
  std::atomic<int64_t> ranks_started{0};
  std::atomic<int64_t> ranks_exited{0};
  std::atomic<int64_t> heartbeats{0};
  std::atomic<int> streams_failed{0};
};

// Thread-safe. Lives until OnDone.
class SimWorker final : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  SimWorker(std::string id, int slots, absl::Duration rank_runtime, FleetCounters* counters)
      : id_(std::move(id)), slots_(slots), rank_runtime_(rank_runtime), counters_(counters) {}

  void Start(v1::WorkerService::Stub* stub);
  // One heartbeat; ranks that have run their time exit first.
  void Beat(absl::Time now);
  void Cancel() { context_.TryCancel(); }
  void WaitDone() { done_.WaitForNotification(); }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  struct Rank {
    v1::RankRef ref;
    int slot = 0;
    absl::Time started;
  };

  void Handle(const v1::CoordinatorMessage& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank event, numbered.
  void QueueEvent(v1::WorkerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Queue(v1::WorkerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string id_;
  const int slots_;
  const absl::Duration rank_runtime_;
  FleetCounters* const counters_;
  grpc::ClientContext context_;
  v1::CoordinatorMessage incoming_;  // owned by the read in flight
  Notification done_;

  Mutex mu_;
  std::deque<v1::WorkerMessage> outgoing_ ABSL_GUARDED_BY(mu_);  // front: being written
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Rank> ranks_ ABSL_GUARDED_BY(mu_);
  int64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t output_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

struct FleetOptions {
  std::string target;  // host:port of the coordinator
  int workers = 2000;
  int slots = 8;
  int channels = 40;  // TCP connections the streams share
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration rank_runtime = absl::Seconds(3);
};

// Starts the workers and heartbeats each once per interval, spread evenly
// over it, from one thread.
class SimFleet {
 public:
  explicit SimFleet(FleetOptions options);
  ~SimFleet();

  // Waits until every worker is registered; false past the deadline.
  bool WaitRegistered(absl::Duration timeout);
  const FleetCounters& counters() const { return counters_; }

 private:
  void HeartbeatLoop();

  const FleetOptions options_;
  FleetCounters counters_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs_;
  std::vector<SimWorker*> workers_;  // each deletes itself in OnDone after WaitDone
  std::atomic<bool> stop_{false};
  std::thread beater_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BENCH_SIM_WORKERS_H_
