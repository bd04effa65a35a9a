// The snapshot segments of the ranks this worker runs
// (domain/snapshot_segment.h): one per job and rank, made when the rank
// first starts here and kept across the job's attempts, so that a rank
// started again on this worker finds the state its predecessor left. Each
// is handed to its rank process as an open descriptor and never has a
// name, so no other job can open it.
//
// Memory is bounded by --snapshot-memory-limit: half of it is for the
// segments of ranks running here, split evenly over the worker's slots;
// the other half is kept for replicas of peers' snapshots. A segment is
// freed when its job ends or is deleted, or to make room when no rank runs
// with it (other jobs' first, least recently used first); replicas the
// same way.
#ifndef RINGMASTER_WORKER_SNAPSHOT_STORE_H_
#define RINGMASTER_WORKER_SNAPSHOT_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "common/unique_fd.h"
#include "domain/snapshot_segment.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Thread-safe: rank threads acquire and release, the link reports and
// frees. One mutex over the table; segments are made outside it.
class SnapshotStore {
 public:
  SnapshotStore(uint64_t limit_bytes, int slots);

  // A segment held for a rank while it runs: the descriptor to hand it.
  class Lease;
  // The job's rank's segment: the one it had here before, or a new one.
  // RESOURCE_EXHAUSTED when the limit leaves no room (the rank then runs
  // without one, and its snapshots go to disk).
  absl::StatusOr<std::shared_ptr<Lease>> Acquire(const std::string& job_id, int rank);
  // Frees the job's segments and replicas (its ranks here have exited).
  void Forget(const std::string& job_id);

  // Replicas of peers' ranks, in the limit's other half: a segment each,
  // sized for the snapshots it gets, so at most two per rank. A piece of a
  // pushed snapshot: the first (offset 0) makes room and begins it, the
  // others follow in order, and the last commits it once its checksum
  // matches. FAILED_PRECONDITION for a piece out of order,
  // RESOURCE_EXHAUSTED when it does not fit, DATA_LOSS for a bad checksum.
  absl::Status WriteReplica(const v1::SnapshotHeader& header, uint64_t offset,
                            absl::string_view data);
  // A piece of the newest snapshot held of the job's rank, from its own
  // segment or a replica, whichever step is higher, with its header.
  // NOT_FOUND when there is none; ABORTED when `step` (unless 0) is no
  // longer the newest one's.
  absl::StatusOr<v1::FetchSnapshotResponse> ReadNewest(const std::string& job_id, int rank,
                                                       int64_t step, uint64_t offset,
                                                       uint64_t max_bytes) const;
  // The replica held here of the job's rank, whole and checked, when it is
  // newer than what `into` (that rank's segment) holds; nullopt otherwise.
  std::optional<std::pair<SnapshotInfo, std::string>> NewerReplica(
      const std::string& job_id, int rank, const SnapshotSegment& into) const;

  // What each segment and replica holds, for heartbeats; those without a
  // committed snapshot are left out.
  std::vector<v1::HeldSnapshots> Held() const;
  // The room each rank's segment has (the limit's local half over the
  // slots).
  uint64_t segment_bytes() const { return segment_bytes_; }
  // Bytes of segments in existence, and of replicas.
  uint64_t reserved_bytes() const;
  uint64_t replica_bytes() const;

 private:
  struct Segment {
    UniqueFd fd;
    std::unique_ptr<SnapshotSegment> view;  // the worker's own mapping
    int leases = 0;                         // ranks running with it
    int64_t last_used = 0;                  // order of Acquire calls
    // A replica: the snapshot being pushed into it, and where its next
    // piece goes.
    std::optional<SnapshotSegment::Slot> writing;
    SnapshotInfo writing_info;
    uint64_t next_offset = 0;
  };
  using Key = std::pair<std::string, int>;  // job, rank
  void Release(const Key& key, const Segment* segment);
  // Frees unleased segments, other jobs' first and the oldest first, until
  // one more fits; false when none is left to free.
  bool MakeRoom(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees replicas not being written, other jobs' first and the oldest
  // first, until `bytes` more fit; false when they do not.
  bool MakeReplicaRoom(const std::string& job_id, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t ReplicaBytesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BeginReplica(const Key& key, const v1::SnapshotHeader& header);
  absl::Status NoRoomForReplica(uint64_t bytes) const;
  absl::Status EndReplica(const Key& key, std::shared_ptr<Segment> replica);

  const uint64_t limit_bytes_;
  const uint64_t segment_bytes_;
  const uint64_t local_bytes_;  // the local half of the limit
  mutable Mutex mu_;
  std::map<Key, std::shared_ptr<Segment>> segments_ ABSL_GUARDED_BY(mu_);
  std::map<Key, std::shared_ptr<Segment>> replicas_ ABSL_GUARDED_BY(mu_);
  int64_t uses_ ABSL_GUARDED_BY(mu_) = 0;
};

class SnapshotStore::Lease {
 public:
  Lease(SnapshotStore* store, Key key, std::shared_ptr<Segment> segment)
      : store_(store), key_(std::move(key)), segment_(std::move(segment)) {}
  ~Lease() { store_->Release(key_, segment_.get()); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  int fd() const { return segment_->fd.get(); }
  uint64_t bytes() const { return segment_->view->capacity(); }
  // The worker's own mapping of it.
  SnapshotSegment& segment() const { return *segment_->view; }

 private:
  SnapshotStore* const store_;
  const Key key_;
  const std::shared_ptr<Segment> segment_;  // open while the rank may start
};

// A committed snapshot's slot header as it travels between workers, and
// back.
v1::SnapshotHeader SnapshotHeaderOf(const std::string& job_id, int rank, const SnapshotInfo& info);
SnapshotInfo SnapshotInfoOf(const v1::SnapshotHeader& header);

// --snapshot-memory-limit: "25%" of this machine's memory, or a size
// ("4GiB", "512MiB", a number of bytes). INVALID_ARGUMENT naming it.
absl::StatusOr<uint64_t> ParseSnapshotMemoryLimit(const std::string& text);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_SNAPSHOT_STORE_H_
