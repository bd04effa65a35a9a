// What the JobManager does once a change is durable: messages to workers
// and job snapshots to watchers. They are queued under the manager's mutex
// as changes are stored, and delivered by Flush, in the order queued, after
// a Sync of the job store that covers them. The Sync (an fdatasync) thus
// runs outside the manager's mutex, and callers flushing at the same time
// share it (group commit).
#ifndef RINGMASTER_COORDINATOR_CORE_OUTBOX_H_
#define RINGMASTER_COORDINATOR_CORE_OUTBOX_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Calls `on_lost` (which must not return), else aborts: what is in memory
// is no longer what is stored.
[[noreturn]] void StoreLost(const std::function<void(const absl::Status&)>& on_lost,
                            const absl::Status& status);

// Thread-safe. Send, Notify, Watch and Unwatch may be called under the
// manager's mutex; Flush must not be. Observers are called under mu_ and
// must only queue.
class Outbox {
 public:
  using Deliver =
      std::function<void(const std::string& worker_id, const v1::CoordinatorMessage& message)>;
  using Observer = std::function<void(const v1::Job&)>;

  // `sync` makes every change stored so far durable, `synced` tells
  // without waiting whether all are; `deliver` hands a message to a
  // worker's stream and must not block.
  // `on_lost` is called when a Sync fails (see Flush).
  // With `in_background`, watchers are called on a thread of the outbox's
  // own: a Flush (a submit's) then waits for the sync, not for every
  // watcher of the change. At most kMaxBackground snapshots wait for that
  // thread; a Flush past that waits for room.
  Outbox(std::function<absl::Status()> sync, std::function<bool()> synced, Deliver deliver,
         std::function<void(const absl::Status&)> on_lost = nullptr, bool in_background = false);
  // Delivers what the watchers' thread has, then ends it: before what the
  // watchers read goes (the owner's destructor calls it first).
  void StopBackground();
  ~Outbox();
  static constexpr size_t kMaxBackground = 4096;

  void Send(const std::string& worker_id, v1::CoordinatorMessage message);
  // Queues the job as it is now for its watchers (nothing when it has none).
  void Notify(const v1::Job& job);

  // Registers `observer` for the job; its first call is `job` as it is now,
  // delivered like a change, and it sees no change queued before.
  int64_t Watch(const v1::Job& job, Observer observer);
  // Registers `observer` for every job; its first calls are `first`, in
  // order, delivered like changes, and it sees no change queued before.
  int64_t WatchAll(std::vector<v1::Job> first, Observer observer);
  // After this returns the observer is not called again.
  void Unwatch(int64_t watch_id);

  // Syncs the store, then delivers everything queued before the call
  // (hands the snapshots to the watchers' thread, in background); at once
  // when nothing is queued or unsynced. A store that cannot be synced
  // cannot be trusted with what is in memory: nothing is delivered, and
  // StoreLost ends the process (or restarts it as a standby) so that a
  // restart recovers the stored state.
  void Flush();

 private:
  struct Item {
    int64_t seq = 0;
    std::string worker_id;  // a message for this worker, or
    v1::CoordinatorMessage message;
    std::shared_ptr<const v1::Job> job;  // a snapshot for the job's watchers
    int64_t only_watch = 0;              // this watcher alone (its first call)
  };
  struct Watcher {
    std::string job_id;  // empty: every job
    int64_t since = 0;   // sees items numbered from here
    Observer observer;
  };

  void DeliverLocked(const Item& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The watchers' thread: delivers what Flush handed it, in order.
  void DeliverInBackground();
  bool BackgroundHasWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(background_mu_) {
    return stopping_ || !background_.empty();
  }
  bool BackgroundHasRoom() ABSL_EXCLUSIVE_LOCKS_REQUIRED(background_mu_) {
    return background_.size() < kMaxBackground;
  }

  const std::function<absl::Status()> sync_;
  const std::function<bool()> synced_;
  const Deliver deliver_;
  const std::function<void(const absl::Status&)> on_lost_;

  Mutex flush_mu_;  // one Flush delivers at a time, keeping the order
  Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, int64_t> watched_jobs_ ABSL_GUARDED_BY(mu_);  // job id -> watch id
  std::set<int64_t> watching_all_ ABSL_GUARDED_BY(mu_);
  int64_t next_watch_id_ ABSL_GUARDED_BY(mu_) = 1;

  Mutex background_mu_;
  std::deque<Item> background_ ABSL_GUARDED_BY(background_mu_);  // oldest first
  bool stopping_ ABSL_GUARDED_BY(background_mu_) = false;
  std::thread watchers_thread_;  // with in_background
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_OUTBOX_H_
