// A worker's side of the replicas of its ranks' snapshots
// (docs/checkpoints.md). While a rank runs, the worker pushes each
// snapshot the rank commits to the peer of the job its StartRank names
// (replica_to), whole and in order, as often as a share of the time
// allows: a push that took d waits d * (1 - share) / share before the
// next, so pushing takes at most that share of the worker's time whatever
// the link's speed. Before a rank starts, the worker puts into its segment
// the newest snapshot of that rank it can find when it is newer than the
// segment's own: a replica it holds itself, else one it fetches from the
// peer the StartRank names (fetch_from).
#ifndef RINGMASTER_WORKER_SNAPSHOT_PEERS_H_
#define RINGMASTER_WORKER_SNAPSHOT_PEERS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "proto/worker.grpc.pb.h"
#include "worker/snapshot_store.h"

namespace ringmaster {

// How a worker calls a peer's agent. A seam for tests.
class PeerAgents {
 public:
  virtual ~PeerAgents() = default;
  virtual absl::Status Push(const v1::SnapshotPeer& peer, const std::string& credential,
                            const v1::PushReplicaRequest& request) = 0;
  virtual absl::StatusOr<v1::FetchSnapshotResponse> Fetch(
      const v1::SnapshotPeer& peer, const std::string& credential,
      const v1::FetchSnapshotRequest& request) = 0;
};

// Over gRPC, under the worker's TLS (its certificate is its client
// certificate); a channel per peer, kept. Thread-safe.
class GrpcPeerAgents final : public PeerAgents {
 public:
  explicit GrpcPeerAgents(Tls tls) : tls_(std::move(tls)) {}
  absl::Status Push(const v1::SnapshotPeer& peer, const std::string& credential,
                    const v1::PushReplicaRequest& request) override;
  absl::StatusOr<v1::FetchSnapshotResponse> Fetch(const v1::SnapshotPeer& peer,
                                                  const std::string& credential,
                                                  const v1::FetchSnapshotRequest& request) override;

 private:
  v1::WorkerAgentService::Stub* StubFor(const v1::SnapshotPeer& peer);
  const Tls tls_;
  Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::WorkerAgentService::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);  // by worker id and address
};

// The pieces a snapshot travels in.
inline constexpr uint64_t kReplicaPieceBytes = 1 << 20;

// When the next push may begin, after one from `start` to `end`: pushing
// then takes `share` of the time.
absl::Time NextPushAt(absl::Time start, absl::Time end, double share);

// Thread-safe. Pushes run on a thread of its own, one at a time.
class SnapshotPeers {
 public:
  struct Options {
    double time_share = 0.03;  // 0: no pushes
    absl::Duration poll = absl::Milliseconds(100);
    absl::Duration fetch_timeout = absl::Seconds(15);
  };
  SnapshotPeers(SnapshotStore* store, PeerAgents* agents, Options options, const Clock* clock);
  ~SnapshotPeers();  // stops the pushing thread
  // Starts the pushing thread (tests push with PushOnce instead).
  void Start();

  // Fills `lease`'s segment for the rank `start` is about to start, as the
  // header says. What it did, for the rank's environment
  // (RINGMASTER_SNAPSHOT_FETCHED: "<step> <worker id>"), or empty.
  std::string Restore(const v1::StartRank& start, SnapshotStore::Lease& lease);

  // Pushes the rank's snapshots while the registration lives (nothing when
  // the StartRank names no peer).
  class Registration;
  std::unique_ptr<Registration> Replicate(const v1::StartRank& start,
                                          std::shared_ptr<SnapshotStore::Lease> lease);

  // One round of the pushing thread: pushes the newest snapshot of the
  // rank pushed least recently that has one not pushed yet, when the time
  // share allows. True when it pushed.
  bool PushOnce();

  struct Stats {
    int64_t pushed = 0;  // snapshots
    int64_t pushed_bytes = 0;
    int64_t failed = 0;
    absl::Duration pushing;  // time spent
  };
  Stats stats() const;

 private:
  struct Rank {
    v1::RankRef ref;
    v1::SnapshotPeer peer;
    std::string credential;
    std::shared_ptr<SnapshotStore::Lease> lease;
    uint64_t pushed_sequence = 0;
    int64_t last_push = 0;  // order of pushes
  };
  void Remove(int id);
  absl::Status PushSnapshot(const Rank& rank, const SnapshotInfo& info);
  absl::StatusOr<int64_t> Fetch(const v1::StartRank& start, SnapshotSegment& segment);
  void Run();

  SnapshotStore* const store_;
  PeerAgents* const agents_;
  const Options options_;
  const Clock* const clock_;
  mutable Mutex mu_;
  std::map<int, Rank> ranks_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pushes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_push_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string last_error_ ABSL_GUARDED_BY(mu_);  // logged once until it changes
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class SnapshotPeers::Registration {
 public:
  Registration(SnapshotPeers* peers, int id) : peers_(peers), id_(id) {}
  ~Registration() { peers_->Remove(id_); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  SnapshotPeers* const peers_;
  const int id_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_SNAPSHOT_PEERS_H_
