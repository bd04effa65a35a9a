#include "worker/snapshot_peers.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/credentials.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// A peer that does not answer within it is taken as gone: a rank's start
// waits on a fetch.
constexpr absl::Duration kCallTimeout = absl::Seconds(5);
// After a failed push: the peer may be starting, or gone.
constexpr absl::Duration kRetryAfterFailure = absl::Seconds(1);
constexpr absl::Duration kRefetchAfter = absl::Milliseconds(200);

void Deadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
}

}  // namespace

v1::WorkerAgentService::Stub* GrpcPeerAgents::StubFor(const v1::SnapshotPeer& peer) {
  const std::string key = absl::StrCat(peer.worker_id(), "@", peer.address());
  MutexLock lock(&mu_);
  std::unique_ptr<v1::WorkerAgentService::Stub>& stub = stubs_[key];
  if (stub == nullptr) {
    // The peer's agent must show its own worker's certificate.
    stub = v1::WorkerAgentService::NewStub(MakeChannel(peer.address(), tls_, peer.worker_id()));
  }
  return stub.get();
}

absl::Status GrpcPeerAgents::Push(const v1::SnapshotPeer& peer, const std::string& credential,
                                  const v1::PushReplicaRequest& request) {
  grpc::ClientContext context;
  Deadline(&context);
  AddBearerToken(&context, credential);
  v1::PushReplicaResponse response;
  return FromGrpcStatus(StubFor(peer)->PushReplica(&context, request, &response));
}

absl::StatusOr<v1::FetchSnapshotResponse> GrpcPeerAgents::Fetch(
    const v1::SnapshotPeer& peer, const std::string& credential,
    const v1::FetchSnapshotRequest& request) {
  grpc::ClientContext context;
  Deadline(&context);
  AddBearerToken(&context, credential);
  v1::FetchSnapshotResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(StubFor(peer)->FetchSnapshot(&context, request, &response)));
  return response;
}

absl::Time NextPushAt(absl::Time start, absl::Time end, double share) {
  if (share <= 0) return absl::InfiniteFuture();
  if (share >= 1) return end;
  return end + (end - start) * ((1 - share) / share);
}

SnapshotPeers::SnapshotPeers(SnapshotStore* store, PeerAgents* agents, Options options,
                             const Clock* clock)
    : store_(store), agents_(agents), options_(options), clock_(clock) {}

SnapshotPeers::~SnapshotPeers() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SnapshotPeers::Start() {
  if (options_.time_share > 0) thread_ = std::thread([this] { Run(); });
}

void SnapshotPeers::Run() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll)) return;
    }
    while (PushOnce()) {
    }
  }
}

std::unique_ptr<SnapshotPeers::Registration> SnapshotPeers::Replicate(
    const v1::StartRank& start, std::shared_ptr<SnapshotStore::Lease> lease) {
  if (!start.has_replica_to() || start.replica_to().address().empty() || lease == nullptr) {
    return nullptr;
  }
  Rank rank;
  rank.ref = start.rank();
  rank.peer = start.replica_to();
  rank.credential = start.replica_credential();
  rank.lease = std::move(lease);
  MutexLock lock(&mu_);
  const int id = next_id_++;
  ranks_.emplace(id, std::move(rank));
  return std::make_unique<Registration>(this, id);
}

void SnapshotPeers::Remove(int id) {
  std::shared_ptr<SnapshotStore::Lease> lease;  // released outside the mutex
  MutexLock lock(&mu_);
  auto it = ranks_.find(id);
  if (it == ranks_.end()) return;
  lease = std::move(it->second.lease);
  ranks_.erase(it);
}

bool SnapshotPeers::PushOnce() {
  Rank rank;
  SnapshotInfo newest;
  int id = -1;
  {
    MutexLock lock(&mu_);
    if (stopping_ || clock_->Now() < next_push_at_) return false;
    for (const auto& [candidate, r] : ranks_) {
      const std::vector<SnapshotInfo> committed = r.lease->segment().Committed();
      // Only what this attempt's rank wrote: the peer keeps one attempt.
      if (committed.empty() || committed[0].sequence == r.pushed_sequence ||
          committed[0].attempt != r.ref.attempt()) {
        continue;
      }
      if (id < 0 || r.last_push < ranks_.at(id).last_push) {
        id = candidate;
        newest = committed[0];
      }
    }
    if (id < 0) return false;
    rank = ranks_.at(id);
  }
  const absl::Time start = clock_->Now();
  const absl::Status pushed = PushSnapshot(rank, newest);
  const absl::Time end = clock_->Now();
  MutexLock lock(&mu_);
  next_push_at_ = NextPushAt(start, end, options_.time_share);
  stats_.pushing += end - start;
  auto it = ranks_.find(id);
  if (pushed.ok()) {
    stats_.pushed++;
    stats_.pushed_bytes += static_cast<int64_t>(newest.bytes);
    last_error_.clear();
  } else {
    stats_.failed++;
    next_push_at_ = std::max(next_push_at_, end + kRetryAfterFailure);
    const std::string error = absl::StrCat("job ", rank.ref.job_id(), " rank ", rank.ref.rank(),
                                           ": cannot push a replica to worker ",
                                           rank.peer.worker_id(), ": ", pushed.message());
    if (error != last_error_) spdlog::warn("{}", error);
    last_error_ = error;
  }
  if (it != ranks_.end()) {
    it->second.last_push = ++pushes_;
    // A snapshot that failed is not tried again: the next one will be.
    it->second.pushed_sequence = newest.sequence;
  }
  return pushed.ok();
}

absl::Status SnapshotPeers::PushSnapshot(const Rank& rank, const SnapshotInfo& info) {
  // A copy first: the rank may overwrite the slot while the push goes on.
  ASSIGN_OR_RETURN(const std::string payload, rank.lease->segment().Read(info));
  v1::PushReplicaRequest request;
  *request.mutable_header() = SnapshotHeaderOf(rank.ref.job_id(), rank.ref.rank(), info);
  uint64_t offset = 0;
  do {
    request.set_offset(static_cast<int64_t>(offset));
    request.set_data(payload.substr(offset, kReplicaPieceBytes));
    RETURN_IF_ERROR(agents_->Push(rank.peer, rank.credential, request));
    offset += request.data().size();
  } while (offset < payload.size());
  return absl::OkStatus();
}

std::string SnapshotPeers::Restore(const v1::StartRank& start, SnapshotStore::Lease& lease) {
  const v1::RankRef& ref = start.rank();
  SnapshotSegment& segment = lease.segment();
  // A replica held here: the rank moved to the worker that kept it.
  if (auto replica = store_->NewerReplica(ref.job_id(), ref.rank(), segment)) {
    if (absl::Status put = segment.Put(replica->first, replica->second); put.ok()) {
      spdlog::info("job {} rank {}: its snapshot of step {} from the replica held here",
                   ref.job_id(), ref.rank(), replica->first.step);
      return absl::StrCat(replica->first.step, " this worker's replica");
    }
  }
  if (!start.has_fetch_from() || start.fetch_from().address().empty()) return "";
  const std::vector<SnapshotInfo> own = segment.Committed();
  if (!own.empty() && own[0].step >= start.fetch_from().step()) return "";
  absl::StatusOr<int64_t> fetched = Fetch(start, segment);
  if (!fetched.ok()) {
    // The rank then resumes from what else there is, and says so.
    spdlog::warn("job {} rank {}: cannot fetch its snapshot from worker {}: {}", ref.job_id(),
                 ref.rank(), start.fetch_from().worker_id(),
                 std::string(fetched.status().message()));
    return "";
  }
  spdlog::info("job {} rank {}: fetched its snapshot of step {} from worker {}", ref.job_id(),
               ref.rank(), *fetched, start.fetch_from().worker_id());
  return absl::StrCat(*fetched, " worker ", start.fetch_from().worker_id());
}

absl::StatusOr<int64_t> SnapshotPeers::Fetch(const v1::StartRank& start, SnapshotSegment& segment) {
  const absl::Time deadline = clock_->Now() + options_.fetch_timeout;
  v1::FetchSnapshotRequest request;
  request.set_job_id(start.rank().job_id());
  request.set_rank(start.rank().rank());
  request.set_max_bytes(static_cast<int32_t>(kReplicaPieceBytes));
  absl::Status last;
  // Tried again while the deadline allows: the holder may be pushing a
  // newer one (ABORTED), or starting.
  while (clock_->Now() < deadline) {
    request.set_step(0);
    std::string payload;
    v1::SnapshotHeader header;
    last = absl::OkStatus();
    do {
      request.set_offset(static_cast<int64_t>(payload.size()));
      absl::StatusOr<v1::FetchSnapshotResponse> piece =
          agents_->Fetch(start.fetch_from(), start.replica_credential(), request);
      if (!piece.ok()) {
        last = piece.status();
        break;
      }
      if (payload.empty()) header = piece->header();
      request.set_step(header.step());
      if (piece->data().empty() && static_cast<int64_t>(payload.size()) < header.bytes()) {
        last = absl::DataLossError("the peer sent an empty piece");
        break;
      }
      payload += piece->data();
    } while (static_cast<int64_t>(payload.size()) < header.bytes());
    if (last.ok()) {
      if (header.rank() != start.rank().rank() || header.job_id() != start.rank().job_id()) {
        return absl::DataLossError("the peer sent another rank's snapshot");
      }
      RETURN_IF_ERROR(
          segment.Put(SnapshotInfoOf(header), payload));  // checked against its checksum
      return header.step();
    }
    if (last.code() != absl::StatusCode::kAborted &&
        last.code() != absl::StatusCode::kUnavailable) {
      return last;
    }
    absl::SleepFor(kRefetchAfter);
  }
  return last;
}

SnapshotPeers::Stats SnapshotPeers::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace ringmaster
