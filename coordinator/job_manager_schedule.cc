// JobManager: placing queued jobs, starting attempts, elastic regrowth.
#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_state.h"

namespace ringmaster {

ProgressWatch::Kind WatchKind(const v1::JobSpec& spec) {
  return spec.has_trainer() ? ProgressWatch::Kind::kTrainer : ProgressWatch::Kind::kCommand;
}

namespace {

GangRequest GangOf(const v1::JobSpec& spec) {
  GangRequest request;
  request.ranks = spec.ranks();
  request.gpus_per_rank = spec.gpus_per_rank();
  request.min_ranks = spec.min_ranks();
  request.cpus = spec.resources().cpus();
  request.memory_mb = spec.resources().memory_mb();
  request.ranks_per_worker = spec.ranks_per_worker();
  request.selector = {spec.worker_selector().begin(), spec.worker_selector().end()};
  return request;
}

}  // namespace

std::vector<WorkerCapacity> JobManager::CapacityLocked(
    const std::vector<SchedulableWorker>& workers, const std::string& except) {
  std::vector<HeldSlots> held;
  for (const auto& [number, record] : table_.resident()) {
    if (record->job.id() == except) continue;
    const v1::Resources& resources = record->job.spec().resources();
    for (const v1::RankStatus& rank : record->job.ranks()) {
      if (RankHoldsSlot(rank)) {
        held.push_back({rank.worker_id(),
                        rank.slot(),
                        {rank.gpus().begin(), rank.gpus().end()},
                        resources.cpus(),
                        resources.memory_mb()});
      }
    }
  }
  return FreeCapacity(workers, held, except);
}

void JobManager::ScheduleLocked() {
  std::vector<QueuedJob> queue;
  for (int64_t number : table_.pending()) {
    const v1::Job& job = table_.resident().at(number)->job;
    queue.push_back({job.id(), GangOf(job.spec())});
  }
  if (queue.empty()) return;
  const std::vector<SchedulableWorker> workers = membership_->Schedulable();
  ScheduleResult result = Schedule(queue, CapacityLocked(workers));
  for (const auto& [id, reason] : result.waiting) {
    JobRecord& entry = *table_.Find(id);
    if (entry.job.pending_reason() != reason) {
      entry.job.set_pending_reason(reason);
      table_.Notify(entry);
    }
  }
  for (const auto& [id, placement] : result.placed) {
    StartAttempt(*table_.Find(id), placement, workers);
  }
}

void JobManager::StartAttempt(JobRecord& entry, const std::vector<RankPlacement>& placement,
                              const std::vector<SchedulableWorker>& workers) {
  v1::Job& job = entry.job;
  std::set<int> ports_in_use;
  const std::string& master_worker = placement[0].worker_id;
  for (const auto& [number, other] : table_.resident()) {
    if (!IsTerminal(other->job.state()) && other->job.ranks_size() > 0 &&
        other->job.ranks(0).worker_id() == master_worker) {
      ports_in_use.insert(other->job.master_port());
    }
  }
  absl::StatusOr<int> port = membership_->PickFreePort(master_worker, ports_in_use);
  if (!port.ok()) {
    job.set_pending_reason(std::string(port.status().message()));
    return;
  }
  auto worker = [&](const std::string& id) -> const SchedulableWorker& {
    return *std::find_if(workers.begin(), workers.end(),
                         [&](const SchedulableWorker& w) { return w.worker_id == id; });
  };
  job.clear_ranks();
  for (const RankPlacement& p : placement) {
    const SchedulableWorker& w = worker(p.worker_id);
    v1::RankStatus* rank = job.add_ranks();
    rank->set_rank(p.rank);
    rank->set_worker_id(p.worker_id);
    rank->set_worker_address(membership_->Address(p.worker_id));
    rank->set_worker_incarnation(w.incarnation);
    rank->set_slot(p.slots[0]);
    // A CPU rank on a GPU worker holds a slot but sees no GPU.
    if (job.spec().gpus_per_rank() > 0 && !w.gpu_indices.empty()) {
      for (int slot : p.slots) rank->add_gpus(w.gpu_indices[slot]);
    }
    rank->set_state(v1::RANK_ASSIGNED);
  }
  const int world = static_cast<int>(placement.size());
  job.set_world_size(world);
  job.set_master_addr(HostOfAddress(membership_->Address(master_worker)));
  job.set_master_port(*port);
  entry.rank_progress.clear();
  entry.unseen.clear();
  job.clear_progress();
  std::set<std::string> used_workers;
  for (const RankPlacement& p : placement) used_workers.insert(p.worker_id);
  std::string message =
      absl::StrCat(world, " ranks on ", used_workers.size(), " workers; rank 0 on ", master_worker);
  v1::Reason reason = v1::SCHEDULED;
  if (world < job.spec().ranks()) {
    reason = v1::SCALED_DOWN;
    message = absl::StrCat("elastic: ", world, " of ", job.spec().ranks(), " ranks fit (min_ranks ",
                           job.spec().min_ranks(), "); ", message);
  }
  if (!table_.Transition(entry, v1::STARTING, reason, message).ok()) {
    job.clear_ranks();  // not stored, so not acted on
    return;
  }
  entry.watch.Begin(WatchKind(job.spec()), world, clock_->Now());
  entry.regrow_since = absl::InfiniteFuture();
  rendezvous_->OpenScope({job.id(), job.attempt()});
  for (int r = 0; r < world; ++r) SendStart(entry, r);
}

void JobManager::SendStart(const JobRecord& entry, int rank) {
  v1::CoordinatorMessage message;
  *message.mutable_start_rank() = BuildStartRank(entry.job, rank, options_.rank_env);
  SendLocked(entry.job.ranks(rank).worker_id(), message);
}

void JobManager::CheckRegrowth(JobRecord& entry, absl::Time now) {
  v1::Job& job = entry.job;
  GangRequest full = GangOf(job.spec());
  full.min_ranks = 0;
  if (job.world_size() >= job.spec().ranks() ||
      !PlaceGang(CapacityLocked(membership_->Schedulable(), job.id()), full).ok()) {
    entry.regrow_since = absl::InfiniteFuture();
    return;
  }
  if (entry.regrow_since == absl::InfiniteFuture()) entry.regrow_since = now;
  const absl::Duration wait = absl::Seconds(job.spec().scale_up_after_s());
  if (now - entry.regrow_since < wait) return;
  if (!table_
           .Transition(entry, v1::RESTARTING, v1::SCALING_UP,
                       absl::StrCat("room for all ", job.spec().ranks(), " ranks for ",
                                    absl::FormatDuration(wait),
                                    ": restarting at full size from a "
                                    "checkpoint taken on stop (now ",
                                    job.world_size(), ")"))
           .ok()) {
    return;
  }
  entry.restart_at = now;
  StopRanks(entry);
}

}  // namespace ringmaster
