// JobManager: the workers' streams (registration, rank events,
// heartbeats), handed to RankEvents under the manager's mutex.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/jobs/job_manager.h"
#include "domain/job_state.h"

namespace ringmaster {

absl::StatusOr<WorkerSession> JobManager::RegisterWorker(WorkerLink* link,
                                                         const v1::RegisterWorker& request,
                                                         int64_t* ack) {
  absl::StatusOr<WorkerSession> session = membership_->Register(link, request);
  if (!session.ok()) return session;
  const std::string& worker_id = session->worker_id;
  spdlog::info("worker {} registered at {} with {} slots, {} GPUs (session {})", worker_id,
               request.address(), request.slots(), request.gpus_size(), session->epoch);
  v1::CoordinatorMessage hello;
  hello.mutable_registered()->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(membership_->options().heartbeat_interval));
  hello.mutable_registered()->set_session(session->epoch);
  if (options_.rank_env.signer != nullptr) {
    hello.mutable_registered()->set_agent_credential(options_.rank_env.signer->Agent(worker_id));
  }
  for (const std::string& root : CheckpointRoots()) {
    hello.mutable_registered()->add_checkpoint_roots(root);
  }
  link->Send(hello);
  {
    MutexLock lock(&mu_);
    events_.Reconcile(*session, request, ack);
  }
  outbox_.Flush();  // before the acknowledgement
  return session;
}

int64_t JobManager::OnRankEvent(const WorkerSession& session, const v1::WorkerMessage& message) {
  {
    MutexLock lock(&mu_);
    switch (membership_->AcceptEvent(session, message)) {
      case EventVerdict::kStale:
        return 0;
      case EventVerdict::kDuplicate:
        break;
      case EventVerdict::kApply:
        events_.Apply(session.worker_id, message);
        break;
    }
  }
  outbox_.Flush();  // the event is stored before it is acknowledged
  RunReplies();
  return message.seq();
}

void JobManager::OnPeerLost(const std::string& job_id, int attempt, int generation, int rank,
                            const std::string& why) {
  {
    MutexLock lock(&mu_);
    JobRecord* entry = table_.Find(job_id);
    if (entry == nullptr || entry->job.attempt() != attempt ||
        entry->job.group_generation() != generation || !entry->job.spec().has_trainer() ||
        !IsActive(entry->job.state()) || rank < 0 || rank >= entry->job.ranks_size()) {
      return;
    }
    std::vector<int> gone;  // ranks whose worker's stream broke
    std::set<std::string> gone_workers;
    for (const v1::RankStatus& r : entry->job.ranks()) {
      if (RankHoldsSlot(r) && !membership_->Connected(r.worker_id())) {
        gone.push_back(r.rank());
        gone_workers.insert(r.worker_id());
      }
    }
    // Otherwise the peer's exit is on its way, or the group forms again.
    if (gone.empty()) return;
    const std::string message = absl::StrCat("rank ", rank, " lost a peer: ", why);
    // An elastic job goes on without them; their workers, should they
    // come back, stop what still runs of them there.
    const bool one = gone_workers.size() == 1;
    if (!attempts_.ShrinkGroup(
            *entry, gone,
            {v1::WORKER_LOST,
             absl::StrCat(gone.size() == 1 ? "rank " : "ranks ", absl::StrJoin(gone, ", "),
                          " lost with worker", one ? " " : "s ", absl::StrJoin(gone_workers, ", "),
                          one ? " (its stream broke); then " : " (their streams broke); then ",
                          message),
             gone.front()})) {
      attempts_.NoteFailure(*entry, {v1::RANK_EXITED, message, rank});
    }
  }
  outbox_.Flush();
}

bool JobManager::OnHeartbeat(const WorkerSession& session, const v1::Heartbeat& beat) {
  bool revived = false;  // its slots are back: the next tick schedules
  if (!membership_->Heartbeat(session, beat, &revived)) return false;
  if (beat.progress_size() == 0 && beat.running_size() == 0 && beat.pulls_size() == 0) {
    return true;
  }
  {
    MutexLock lock(&mu_);
    events_.Heartbeat(session, beat);
  }
  outbox_.Flush();
  return true;
}

}  // namespace ringmaster
