// Which workers belong to the cluster, whether they are healthy, and how to
// reach them. A worker's health moves ALIVE -> SUSPECT (its stream broke or
// its heartbeats are late) -> LOST (the stream stayed broken for the grace,
// or no heartbeat came for the heartbeat timeout). A LOST worker that
// heartbeats or registers again is ALIVE again.
//
// Identity: each registration opens a session (an epoch, +1 per id). A
// registration for an id whose stream is still open is refused, so a second
// process with the same --id cannot take a live worker's place; messages of
// an ended session are ignored. Rank events carry a number per worker
// incarnation and are applied once.
#ifndef RINGMASTER_COORDINATOR_CORE_WORKER_MEMBERSHIP_H_
#define RINGMASTER_COORDINATOR_CORE_WORKER_MEMBERSHIP_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "coordinator/core/schedulable_worker.h"
#include "coordinator/core/worker_link.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

struct MembershipOptions {
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // Without a heartbeat for this long a worker is LOST, stream or not.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // A worker whose stream broke is LOST this long after, unless it is back.
  absl::Duration worker_grace = absl::Seconds(3);
  // --topology-levels, widest first ("block", "rack", "host"): a worker's
  // domain at each is its label of that name; `host` is its hostname
  // unless labelled.
  std::vector<std::string> topology_levels;
};

// One registration of a worker: what a stream presents with each message.
struct WorkerSession {
  std::string worker_id;
  int64_t epoch = 0;
  std::string incarnation;  // of the worker process
  // Not the process of this coordinator's previous session of the id, or
  // there was none: event numbers start again.
  bool new_incarnation = true;
};

enum class EventVerdict {
  kApply,      // first time: apply it, then acknowledge
  kDuplicate,  // applied before: acknowledge only
  kStale,      // of an ended session: ignore
};

struct LostWorker {
  std::string worker_id;
  std::string why;
};

// Thread-safe: one mutex guards everything. Called by the worker streams
// (any gRPC thread) and by the JobManager, which may hold its own mutex
// while calling in; this class never calls out except WorkerLink::Send,
// which only queues.
class WorkerMembership {
 public:
  WorkerMembership(const Clock* clock, MembershipOptions options);

  const MembershipOptions& options() const { return options_; }

  // Opens a session for the worker on `link`. ALREADY_EXISTS, naming the
  // address that holds the id, when the id's stream is still open. The
  // worker is not schedulable until Admit.
  absl::StatusOr<WorkerSession> Register(WorkerLink* link, const v1::RegisterWorker& request);
  // Marks a registered session schedulable (after its ranks are reconciled).
  void Admit(const WorkerSession& session);
  // The stream of `link` ended; its worker is SUSPECT if it was its
  // current stream.
  void Disconnect(const WorkerLink* link);

  // False when `session` is not the worker's current one. `revived` is set
  // when the heartbeat brings a LOST worker back.
  bool Heartbeat(const WorkerSession& session, const v1::Heartbeat& beat, bool* revived);
  // Decides whether the rank event numbered `message.seq()` is applied; an
  // applied exit frees the rank's slot in the worker's running ranks.
  EventVerdict AcceptEvent(const WorkerSession& session, const v1::WorkerMessage& message);

  // The domain of id `domain` (SchedulableWorker::domains): its level's
  // index and its path ("b1/r1"). Ids stay for the coordinator's life.
  std::pair<int, std::string> Domain(int domain) const;

  // Re-evaluates every worker's health; returns those newly LOST.
  std::vector<LostWorker> Expire();
  // A worker known from stored jobs but not registered yet (after a
  // coordinator restart): SUSPECT, and LOST unless it registers within
  // the heartbeat timeout.
  void Expect(const std::string& worker_id, const std::string& address);

  // What the worker's latest report (heartbeat or registration) said of a
  // rank: `reports` counts its reports so far, over all its sessions.
  struct Sighting {
    int64_t reports = 0;
    bool running = false;  // the latest report listed the rank
  };
  // Of each RUNNING rank of the job's current attempt, by its index:
  // null for the other ranks and those of a worker that never registered.
  std::vector<std::optional<Sighting>> Sightings(const v1::Job& job) const;
  // The workers whose list of running ranks may have changed (a report, an
  // applied exit) since `*since`, which it advances: a caller that asks
  // before each look at Sightings looks again only where they changed.
  absl::flat_hash_set<std::string> ListsChangedSince(int64_t* since) const;

  // Queues `message` on the worker's stream; false when it has none.
  bool Send(const std::string& worker_id, const v1::CoordinatorMessage& message);
  // Whether the worker has an open stream.
  bool Connected(const std::string& worker_id) const;
  // Whether it is ALIVE with an open stream: it answers now (a paused
  // worker keeps its stream but is not ALIVE past the heartbeat timeout).
  bool Answering(const std::string& worker_id) const;
  std::string Address(const std::string& worker_id) const;
  // Whether the worker has registered (or is expected back), and how many
  // workers have.
  bool Known(const std::string& worker_id) const;
  int Size() const;

  // ALIVE, connected, admitted workers in registration order.
  std::vector<SchedulableWorker> Schedulable() const;
  std::vector<v1::Worker> List() const;

  // A port from the worker's latest free-port report not in `in_use`;
  // FAILED_PRECONDITION when it reported none.
  absl::StatusOr<int> PickFreePort(const std::string& worker_id, const std::set<int>& in_use) const;

 private:
  using RankKey = std::tuple<std::string, int, int>;  // job, attempt, rank
  using RankKeyView = std::tuple<std::string_view, int, int>;
  struct Member {
    v1::Worker info;  // id, address, slots, gpus, usage; state and its reason
    WorkerLink* link = nullptr;
    std::string incarnation;
    int64_t applied_seq = 0;  // of this incarnation
    bool admitted = false;
    absl::Time last_heartbeat;
    absl::Time lose_at = absl::InfiniteFuture();  // while it has no stream
    std::vector<int> free_ports;
    std::map<RankKey, v1::RunningRank, std::less<>> running;
    // `running` as a list for snapshots, made when first asked for; null
    // after a change.
    mutable std::shared_ptr<const ReportedRanks> running_list;
    int64_t reports = 0;      // heartbeats and registrations
    int64_t listed_at = 0;    // list_changes_ when `running` last changed
    TopologyDomains domains;  // by topology level: an id of domain_names_; -1: none
    // info's labels and topology, for snapshots: set where they change.
    SharedLabels labels;
  };
  // Sets the member's topology (info.topology, domains) from its labels
  // and hostname, and the labels its snapshots share.
  void PlaceInTopology(Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Member* Find(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Member* Find(const std::string& worker_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current member of `session`, or null when the session has ended.
  Member* Current(const WorkerSession& session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the member's health from its stream and heartbeat age; true when
  // it has just become LOST.
  bool Evaluate(Member& m, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetState(Member& m, v1::WorkerState state, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  const MembershipOptions options_;

  mutable Mutex mu_;
  // By id: looked up for every rank each tick.
  absl::node_hash_map<std::string, Member> members_ ABSL_GUARDED_BY(mu_);
  // members_ in registration order, for stable placement.
  std::vector<Member*> in_order_ ABSL_GUARDED_BY(mu_);
  int64_t list_changes_ ABSL_GUARDED_BY(mu_) = 0;
  // Every domain a worker has been in, by id: its level and its path
  // ("b1/r1" for rack r1 of block b1), which names it.
  std::vector<std::pair<int, std::string>> domain_names_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> domain_ids_ ABSL_GUARDED_BY(mu_);  // by "level:path"
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_WORKER_MEMBERSHIP_H_
