// Which workers exist, whether they are alive (by heartbeat), and what they
// offer. Slot use is not tracked here: the JobManager derives it from the
// ranks it has placed.
#ifndef RINGMASTER_COORDINATOR_WORKER_REGISTRY_H_
#define RINGMASTER_COORDINATOR_WORKER_REGISTRY_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/worker_link.h"
#include "proto/cluster.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

struct WorkerRecord {
  v1::Worker info;              // state, address, slots, gpus
  WorkerLink* link = nullptr;   // null while the worker is not connected
  absl::Time last_heartbeat;
  std::vector<int> free_ports;  // most recent report from the worker
  int64_t order = 0;            // registration order, for stable placement
};

// Thread-compatible: the JobManager calls it under its mutex.
class WorkerRegistry {
 public:
  WorkerRegistry(const Clock* clock, absl::Duration heartbeat_timeout)
      : clock_(clock), heartbeat_timeout_(heartbeat_timeout) {}

  // A new worker, or one coming back: it is ALIVE and `link` is its stream.
  WorkerRecord& Register(const v1::RegisterWorker& request, WorkerLink* link);
  // A worker known from stored jobs but not connected yet (after a
  // coordinator restart); it is LOST unless it registers within the timeout.
  void Expect(const std::string& worker_id, const std::string& address);

  absl::Status Heartbeat(const std::string& worker_id, const v1::Heartbeat& beat);
  // Forgets the link if it is still the worker's current one.
  void Disconnect(const std::string& worker_id, const WorkerLink* link);

  // Marks LOST every ALIVE worker whose last heartbeat is older than the
  // timeout, and returns their ids.
  std::vector<std::string> ExpireLost();

  WorkerRecord* Find(const std::string& worker_id);
  // Alive and connected workers in registration order.
  std::vector<const WorkerRecord*> Schedulable() const;
  std::vector<v1::Worker> List() const;

  // A port from the worker's latest free-port report that is not in
  // `in_use`; FAILED_PRECONDITION when it reported none.
  absl::StatusOr<int> PickFreePort(const std::string& worker_id,
                                   const std::set<int>& in_use) const;

 private:
  const Clock* const clock_;
  const absl::Duration heartbeat_timeout_;
  int64_t next_order_ = 0;
  std::map<std::string, WorkerRecord> workers_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_WORKER_REGISTRY_H_
