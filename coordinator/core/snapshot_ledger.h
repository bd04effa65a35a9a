// What a job's workers hold of it in memory (worker/snapshot_store.h), as
// their heartbeats say: each rank's committed snapshot steps, in the
// segment of the worker that ran it and in the replica a peer keeps, and
// from them the job's consistent step, the highest step every rank holds.
#ifndef RINGMASTER_COORDINATOR_CORE_SNAPSHOT_LEDGER_H_
#define RINGMASTER_COORDINATOR_CORE_SNAPSHOT_LEDGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
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
  // every one of its ranks holds in its worker's segment (consistent_step,
  // 0 when there is none) and in a peer's replica (replica_step), the
  // highest any holds, and the size of one. Its ranks are `members` when it
  // is attempt `attempt` (a group that shrank leaves some out), else those
  // below the world size its snapshots name.
  v1::SnapshotState State(int attempt = -1, const std::vector<int>& members = {}) const;
  bool empty() const { return held_.empty(); }

  // Where the rank's newest snapshot is held on a worker `reachable` says
  // is, a segment or a replica, when it is newer than any `worker_id`
  // holds of the rank (the worker about to start it); nullopt otherwise.
  struct Source {
    std::string worker_id;
    int64_t step = 0;
  };
  std::optional<Source> SourceFor(int rank, const std::string& worker_id,
                                  const std::function<bool(const std::string&)>& reachable) const;
  // The worker whose own segment (not a replica) holds the rank's newest
  // snapshot; "" when none does.
  std::string SegmentHolder(int rank) const;

 private:
  struct Held {
    std::string worker_id;
    v1::HeldSnapshots snapshots;
  };
  // The highest step every one of `ranks` of `attempt` holds, in segments
  // or in replicas; 0 when there is none.
  int64_t CommonStep(bool replicas, int attempt, const std::vector<int>& ranks) const;

  std::vector<Held> held_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_SNAPSHOT_LEDGER_H_
