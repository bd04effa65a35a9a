// Rank events on their way to the coordinator: numbered 1, 2, ... for this
// worker process and kept until the coordinator acknowledges them, so that
// none is lost when the stream or the coordinator dies between a write and
// its application. After a reconnect they go again inside the registration.
#ifndef RINGMASTER_WORKER_EVENT_OUTBOX_H_
#define RINGMASTER_WORKER_EVENT_OUTBOX_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "common/mutex.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Thread-safe. Its size is bounded by the ranks this worker runs (each
// rank adds a started and an exited event) and its GPUs (GpuWatch sends
// each kind of error of a GPU at most once per interval), and the
// coordinator acknowledges them as soon as it has them. The last kRecentExits
// acknowledged exits are kept too, for a coordinator that asks again.
class EventOutbox {
 public:
  static constexpr size_t kRecentExits = 4096;

  // Numbers `event` and keeps it; returns it with its number.
  v1::WorkerMessage Add(v1::WorkerMessage event);
  // Forgets every event numbered up to `seq`.
  void Acknowledge(int64_t seq);
  // The events not acknowledged yet, oldest first.
  std::vector<v1::WorkerMessage> Unacknowledged() const;
  // The newest exit event of `rank`, acknowledged or not, without its
  // number; null when none is kept.
  std::optional<v1::WorkerMessage> FindExit(const v1::RankRef& rank) const;

 private:
  mutable Mutex mu_;
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<v1::WorkerMessage> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::WorkerMessage> recent_exits_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_EVENT_OUTBOX_H_
