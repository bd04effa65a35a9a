// What a job's workers hold of it in memory (worker/snapshot_store.h), as
// their heartbeats say: each rank's committed snapshot steps, and from
// them the job's consistent step, the highest step every rank holds.
#ifndef RINGMASTER_COORDINATOR_CORE_SNAPSHOT_LEDGER_H_
#define RINGMASTER_COORDINATOR_CORE_SNAPSHOT_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Thread-compatible: the JobManager keeps one per job under its mutex.
class SnapshotLedger {
 public:
  // What `worker_id` holds of the job now: replaces all it said before.
  void Report(const std::string& worker_id, const std::vector<v1::HeldSnapshots>& held);
  // Forgets everything (a job's segments freed).
  void Clear() { held_.clear(); }

  // The snapshots of the newest attempt that wrote any: the highest step
  // every one of its ranks holds (consistent_step, 0 when there is none),
  // the highest any holds, and the size of one.
  v1::SnapshotState State() const;
  bool empty() const { return held_.empty(); }

 private:
  struct Held {
    std::string worker_id;
    v1::HeldSnapshots snapshots;
  };
  std::map<int, Held> held_;  // by rank
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_SNAPSHOT_LEDGER_H_
